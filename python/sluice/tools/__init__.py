"""Command-line tools: `python -m sluice.tools.tfrecord2idx`."""
