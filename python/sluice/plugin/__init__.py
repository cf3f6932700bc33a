"""Framework plug-ins: `sluice.plugin.pytorch`."""
