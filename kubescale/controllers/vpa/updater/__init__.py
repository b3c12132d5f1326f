"""The VPA updater loop (upstream ``pkg/updater``)."""
