"""The child process of `declrag.runtime.gguf` (run as a script: it imports llama-cpp-python and nothing of declrag).

``--system-info``: print llama.cpp's system info (what the library was built for).
``--load MODEL THREADS``: print it, then load the GGUF file, read a short prompt and generate one token with
THREADS threads (as the real load does), then print "ok". A library built for instructions this CPU lacks kills
this process by a signal, which the parent reports.
"""

import sys

import llama_cpp

PROMPT = ("Answer from the passages. Passage [1]: The Normans were the people who in the 10th and 11th centuries "
          "gave their name to Normandy, a region in France. Question: In what country is Normandy located? Answer:")


def main(argv: list[str]) -> int:
    info = llama_cpp.llama_print_system_info()
    print("system_info:", (info.decode() if isinstance(info, bytes) else str(info)).strip(), flush=True)
    if argv[:1] == ["--load"]:
        model, threads = argv[1], int(argv[2])
        llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_threads=threads, n_threads_batch=threads, verbose=False)
        llm.create_completion(PROMPT, max_tokens=1, temperature=0.0)
        print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
