"""An in-process Kubernetes API server speaking the real REST protocol over HTTP(S)."""
