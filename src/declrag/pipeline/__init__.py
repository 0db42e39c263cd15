"""The RAG program (`program`), the ordered list of its stages (`stage_list`), the stages (`stages`) and a saved
program's artifact (`saved`)."""
