from migrator.ground import interrupt

interrupt.install()  # before the heavy imports: Ctrl-C in the first moment is "interrupted", exit 130

from migrator.cli import main  # noqa: E402

if __name__ == "__main__":  # pragma: no cover
    try:
        main()
    finally:
        interrupt.run_over()  # usage errors, `--help`: the way out, too late for a Ctrl-C to stop anything
