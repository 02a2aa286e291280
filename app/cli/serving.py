"""The explorer: ``demo`` (prepare the default run, then serve) and ``serve``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from stateseer.app.cli.options import (
    _add_host_port,
    _check_bind,
    _nonnegative_float,
    _states_arg,
)
from stateseer.app.workflows.prepare import DEMO_MAX_SECONDS
from stateseer.core.defaults import N_STATES


def _serve(run: str, host: str, port: int, debug: bool = False,
           compare: str | None = None, allowed_hosts: list[str] | None = None) -> int:
    from stateseer.app.main import serve

    _check_bind(host, "the explorer", debug, warn=False)  # serve() warns itself
    return serve(run, host, port, compare=compare, allowed_hosts=allowed_hosts, debug=debug)


def _cmd_serve(args: argparse.Namespace) -> int:
    return _serve(args.run, args.host, args.port, args.debug, compare=args.compare,
                  allowed_hosts=args.allowed_hosts)


def _cmd_demo(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.prepare import prepare_run

    if not args.no_serve:
        _check_bind(args.host, "the explorer", warn=False)  # warned when served
    prepare_run(args.run, n_states=args.states, max_seconds=args.max_seconds or None,
                log=lambda msg: print(f"stateseer demo: {msg}", file=sys.stderr))
    if args.no_serve:
        print(json.dumps({"run": args.run, "fsm": f"{args.run}/abstraction/fsm.json"}))
        return 0
    return _serve(args.run, args.host, args.port, allowed_hosts=args.allowed_hosts)


def _add_serving(sub: Any) -> None:
    d = sub.add_parser("demo", help="train or reuse the default LSTM on rotten_tomatoes, "
                       "record, abstract, diagnose and serve it")
    d.add_argument("--run", default="runs/rt", help="run directory")
    d.add_argument("--states", type=_states_arg, default=N_STATES,
                   help="abstract states, or 'auto' (as for abstract)")
    d.add_argument("--max-seconds", type=_nonnegative_float, default=DEMO_MAX_SECONDS,
                   help="training budget of a new model, in seconds (0: none); the best model "
                   "so far is kept when it runs out")
    _add_host_port(d)
    d.add_argument("--no-serve", action="store_true", help="prepare the run but do not serve")
    d.set_defaults(func=_cmd_demo)

    s = sub.add_parser("serve", help="serve the explorer app for a run")
    s.add_argument("run", help="run directory")
    _add_host_port(s)
    s.add_argument("--debug", action="store_true",
                   help="Dash debug mode (loopback --host only: it can run code)")
    s.add_argument("--compare", metavar="OTHER_RUN",
                   help="a second run on the same data to compare with (states matched by "
                   "co-occurrence; changed inputs listed; default: none)")
    s.set_defaults(func=_cmd_serve)
