"""``python -m routing.simulator [--host H] [--port P] [--preset demo|plain]
[--google-account FILE]...``.

``--google-account`` trusts a service-account key file at the Vertex AI token endpoint
(``/token``; the file's ``token_uri`` should point there).

Runs a simulator in the foreground until Ctrl-C; prints one line saying where it listens
(``--port 0`` picks a free port, and the line tells which).
"""

from __future__ import annotations

import argparse

from routing.simulator.presets import PRESETS, describe


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m routing.simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    parser.add_argument("--google-account", action="append", default=[], metavar="FILE")
    args = parser.parse_args(argv)
    upstream = PRESETS[args.preset](args.host, args.port).start()
    for path in args.google_account:
        upstream.google.register_file(path)
    print(describe(upstream, args.preset), flush=True)
    upstream.serve_forever()


if __name__ == "__main__":
    main()
