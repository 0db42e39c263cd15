"""Text as every layer reads it: answer normalisation and the specific details SIA checks (`normalize`), sentences,
lines and words as spans (`sentences`), and token counters with offsets (`tokens`). Nothing here imports declrag."""
