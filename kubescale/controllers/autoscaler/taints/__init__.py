r"""The autoscaler's taints and cordon on Node objects (upstream's \`\`utils/taints\`\`)."""
