"""Process-wide helpers every layer may use: declrag's folders (`folders`), the bounds of its caches
(`cache_limits`), peak memory per stage (`process_memory`), traces (`tracing`), where models run (`device`), where
declarations are found (`resources`), what this install is (`about`), and the local GGUF models' files and llama.cpp
build (`gguf`, its guarded first load in a child process: `_llama_child`). Each is light: none imports a model, an LM
library or a server."""
