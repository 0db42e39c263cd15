"""Process-wide helpers every layer may use: declrag's folders (`folders`), the bounds of its caches
(`cache_limits`), peak memory per stage (`process_memory`), traces (`tracing`), where models run (`device`), where
declarations are found (`resources`) and what this install is (`about`). Each is light: none imports a model or a
server."""
