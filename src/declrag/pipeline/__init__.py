"""The RAG program and its stages."""
