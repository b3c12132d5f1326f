"""CA and serving certificates: generation, rotation, hot-reloading TLS context, caBundle."""
