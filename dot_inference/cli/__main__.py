"""`python -m dot_inference.cli`: the `dot-inference` command."""

from dot_inference.cli import cli

if __name__ == "__main__":  # pragma: no cover
    cli()
