"""The ``replcheck`` command line: the only place that turns errors into exit codes.

Exit codes: 0 in sync (or the command succeeded), 1 differences found, 2 could not run
(bad input, unreachable database, a feature not available yet).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from cdc_core.errors import ReplcheckError

EXIT_OK = 0
EXIT_DIFFERENCES = 1
EXIT_ERROR = 2

app = typer.Typer(
    name="replcheck",
    help="Prove that a replicated copy of a database equals its source, and repair what differs.",
    no_args_is_help=True,
    add_completion=False,
)
cdc_app = typer.Typer(help="Log-based change data capture into a Delta lake.", no_args_is_help=True)
app.add_typer(cdc_app, name="cdc")


def _not_available(command: str, issue: str) -> None:
    typer.echo(
        f"replcheck {command} is not available yet in this version ({issue}); nothing was done.",
        err=True,
    )
    raise typer.Exit(EXIT_ERROR)


@app.command("check-contract")
def check_contract_command(
    spark: Annotated[bool, typer.Option(help="Also replay the vectors through Spark.")] = True,
    master: Annotated[str, typer.Option(help="Spark master for the check.")] = "local[2]",
) -> None:
    """Check that this installation reproduces the hash contract's golden vectors."""
    from validator.contract_check import check_contract

    session = None
    if spark:
        from validator.spark_session import build_spark_session

        def session() -> object:
            return build_spark_session(app_name="replcheck-check-contract", master=master)

    checks = check_contract(session)
    for check in checks:
        verdict = "ok" if check.passed else f"{len(check.mismatched)} MISMATCHED"
        typer.echo(f"{check.engine:>7}: {check.vectors} golden vectors, {verdict}")
        for vector_id in check.mismatched[:20]:
            typer.echo(f"         mismatch: {vector_id}")
    raise typer.Exit(EXIT_OK if all(c.passed for c in checks) else EXIT_DIFFERENCES)


@app.command()
def validate() -> None:
    """Validate source against target at an agreed log position."""
    _not_available("validate", "the validator issue")


@app.command()
def gate() -> None:
    """CI gate: fail when replication drifted beyond a threshold."""
    _not_available("gate", "the validator issue")


@app.command()
def demo() -> None:
    """Run the embedded end-to-end demo."""
    _not_available("demo", "the validator issue; run `replcheck check-contract` meanwhile")


@app.command()
def resync() -> None:
    """Repair exactly the rows a validation found different."""
    _not_available("resync", "the re-sync issue")


@app.command()
def report() -> None:
    """Render an existing result.json as HTML, JUnit or Markdown."""
    _not_available("report", "the reports issue")


@cdc_app.command("run")
def cdc_run() -> None:
    """Run a CDC pipeline from a source's log into the lake."""
    _not_available("cdc run", "the CDC core issue")


def main() -> None:
    """Console-script entry point."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except ReplcheckError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
