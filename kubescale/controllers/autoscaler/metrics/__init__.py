r"""The cluster autoscaler's metrics, with upstream's names (\`\`cluster_autoscaler_*\`\`)."""
