"""The composition function's runtime (as crossplane/function-template-python)."""

import click
from crossplane.function import logging, runtime

from function import fn


@click.command()
@click.option("--debug", "-d", is_flag=True, help="Emit debug logs.")
@click.option(
    "--address", default="0.0.0.0:9443", show_default=True, help="Address at which to listen."
)
@click.option(
    "--tls-certs-dir",
    envvar="TLS_SERVER_CERTS_DIR",
    help="Serve using mTLS certificates.",
)
@click.option("--insecure", is_flag=True, help="Run without mTLS credentials.")
def cli(debug: bool, address: str, tls_certs_dir: str, insecure: bool) -> None:
    """A Crossplane composition function that serves LLMs with vLLM."""
    try:
        level = logging.Level.DEBUG if debug else logging.Level.INFO
        logging.configure(level=level)
        runtime.serve(
            fn.FunctionRunner(),
            address,
            creds=runtime.load_credentials(tls_certs_dir),
            insecure=insecure,
        )
    except Exception as e:
        click.echo(f"cannot run function: {e}")
        raise SystemExit(1) from e


if __name__ == "__main__":
    cli()
