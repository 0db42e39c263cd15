"""Importing declrag, building a program and answering with it leave the process's LiteLLM and DSPy settings
and its environment as the caller made them. Each case runs in a fresh interpreter, so that nothing another
test imported or configured hides a change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROBE = """
import json, os, sys
{before}

def state():
    import dspy, litellm
    return {{"drop_params": litellm.drop_params, "suppress_debug_info": litellm.suppress_debug_info,
             "dspy_cache": str(getattr(dspy.cache.disk_cache, "directory", None)),
             "dspy_lm": repr(dspy.settings.lm),
             "env": {{k: v for k, v in os.environ.items()}}}}

first = state()
import declrag
after_import = state()
{then}
print(json.dumps({{"first": first, "after_import": after_import, "after_use": state(), "extra": extra}}))
"""

CONFIGURE = """
import dspy, litellm
litellm.drop_params = False
litellm.suppress_debug_info = False
dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=sys.argv[1] + "/my-dspy-cache")
os.environ["MY_APP_SETTING"] = "kept"
"""

USE = """
from declrag.config import ProgramConfig
from declrag.pipeline.program import RAGProgram
from declrag.stores._lancedb import LanceStore
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import corpus

store = LanceStore(sys.argv[1] + "/store")
store.upsert(*corpus(HashEmbedder()))
prog = RAGProgram(ProgramConfig.model_validate({"generate": {"mode": "lm"}}), store=store,  # the local model writes
                  embedder=HashEmbedder()).warm_up()
answer = prog(question="What is the capital of Italy?")
extra = {"answer": answer.answer, "calls": answer.usage["total"]["calls"],
         "loaded": declrag.registry.loaded()}
"""


def clean_env(tmp_path) -> dict[str, str]:
    """A bare environment (and the caller's PYTHONPATH, where it points the interpreter at a checkout's src/)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def run_probe(tmp_path, before: str, then: str) -> dict:
    code = PROBE.format(before=textwrap.dedent(before), then=textwrap.dedent(then))
    env = clean_env(tmp_path)
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_changes_nothing_the_caller_configured(tmp_path):
    s = run_probe(tmp_path, CONFIGURE, "extra = None")
    assert s["first"]["dspy_cache"].endswith("my-dspy-cache") and s["first"]["drop_params"] is False
    assert s["after_import"] == s["first"]


def test_import_before_litellm_leaves_the_environment_as_it_was(tmp_path):
    """declrag imports LiteLLM itself (with its price table read offline); the variable that asks for that
    is set for the import only."""
    s = run_probe(tmp_path, "", "extra = None")
    assert "LITELLM_LOCAL_MODEL_COST_MAP" not in s["after_import"]["env"]
    assert s["after_import"]["env"] == s["first"]["env"]
    assert s["after_import"]["drop_params"] is False  # LiteLLM's own default, untouched


@pytest.mark.slow
def test_building_and_running_a_program_on_the_local_model_changes_nothing(tmp_path):
    """The real path: the default LM route (the in-process local model, through LiteLLM), one answer."""
    s = run_probe(tmp_path, CONFIGURE, USE)
    assert s["extra"]["calls"] >= 1 and s["extra"]["answer"].strip()
    assert s["extra"]["loaded"]["local_models"], "the local model is held by declrag.registry"
    # not compared: what the libraries do themselves on their first call, in any process that uses them (DSPy
    # turns LiteLLM's banner off; LiteLLM's tokenizer module points tiktoken at the files it ships)
    s["after_use"]["env"].pop("TIKTOKEN_CACHE_DIR", None)
    for key in ("drop_params", "dspy_cache", "dspy_lm", "env"):
        assert s["after_use"][key] == s["first"][key], key


LEVELS = """
import importlib, json, logging, pkgutil
import optuna
from transformers.utils import logging as hf_logging

optuna.logging.set_verbosity(optuna.logging.DEBUG)  # the caller's own choices, neither library's default
hf_logging.set_verbosity_info()

def levels():
    return {"optuna": optuna.logging.get_verbosity(), "optuna_logger": logging.getLogger("optuna").level,
            "transformers": hf_logging.get_verbosity(), "transformers_logger": logging.getLogger("transformers").level,
            "root": logging.getLogger().level}

first = levels()
import declrag
imported = []
for m in pkgutil.walk_packages(declrag.__path__, "declrag."):
    if not m.name.endswith("__main__"):  # the command line's entry point runs the command
        importlib.import_module(m.name)
        imported.append(m.name)
print(json.dumps({"first": first, "after": levels(), "imported": imported}))
"""


def test_importing_every_module_leaves_optuna_and_transformers_logging_as_the_caller_set_it(tmp_path):
    """No module sets a library's log level when it is imported (a compile quiets Optuna while it runs only)."""
    env = clean_env(tmp_path)
    r = subprocess.run([sys.executable, "-c", LEVELS], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert {"declrag.optimize._objective", "declrag.optimize._workers", "declrag.optimize._run"} <= set(s["imported"])
    assert s["first"]["optuna"] == 10 and s["first"]["transformers"] == 20  # DEBUG, INFO: the probe set them
    assert s["after"] == s["first"]
