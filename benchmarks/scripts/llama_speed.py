"""Prompt-processing and generation tokens/s of the llama_cpp on sys.path (benchmarks/scripts/bench-llama-build.sh runs it once
per build): ``python scripts/llama_speed.py MODEL THREADS REPEATS`` prints "pp tg", each the median over REPEATS
fresh processes' runs (a 256-token prompt read in one batch; 128 tokens generated one at a time)."""

import statistics
import subprocess
import sys
import time

PROMPT_TOKENS, GEN_TOKENS = 256, 128


def once(model: str, threads: int) -> tuple[float, float]:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
    text = "The Normans were the people who gave their name to Normandy, a region in France. " * 40
    tokens = llm.tokenize(text.encode())[:PROMPT_TOKENS]
    llm.eval(tokens[:8])  # warm-up
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(tokens)
    pp = len(tokens) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(GEN_TOKENS):
        llm.eval([tokens[i % len(tokens)]])
    tg = GEN_TOKENS / (time.perf_counter() - t0)
    llm.close()
    return pp, tg


def main() -> None:
    model, threads, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4:  # one run, in this process
        print(*once(model, threads))
        return
    runs = [subprocess.run([sys.executable, __file__, model, str(threads), "1", "--once"], check=True,
                           capture_output=True, text=True).stdout.split() for _ in range(repeats)]
    print(f"{statistics.median(float(r[0]) for r in runs):.0f} {statistics.median(float(r[1]) for r in runs):.1f}")


if __name__ == "__main__":
    main()
