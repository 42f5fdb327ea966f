"""The `--inputs-from FILE.gguf` option shared by report, check and replay (harness.cases.model_inputs)."""
from __future__ import annotations

import sys

from harness.cli.options import add_verify_weights_option, path_name, positive_int


def add_option(parser) -> None:
    parser.add_argument("--inputs-from", type=path_name, default=None, metavar="FILE.gguf",
                        help="also judge each kernel on the inputs a reference decode of this checkpoint feeds it "
                             "(input variant `model`)")
    parser.add_argument("--model-positions", type=positive_int, default=None,
                        help="positions the reference decode runs for --inputs-from (default 6)")
    add_verify_weights_option(parser)


def check(args) -> None:
    """Before any work: the checkpoint exists and is readable, and --model-positions goes with it."""
    from harness.cli.lifecycle import check_input
    path = getattr(args, "inputs_from", None)
    if path:
        check_input(path, "--inputs-from")
    elif getattr(args, "model_positions", None) is not None:
        raise ValueError("--model-positions: applies to --inputs-from; give the checkpoint too")


def apply(args) -> None:
    """Capture the checkpoint's decode when --inputs-from is given (a clear error for a bad file). The decode's
    prompt is fixed (seed 0 of case_inputs.capture), so a report's model case and its replay see the same
    values."""
    from harness.cases import model_inputs as case_inputs
    check(args)
    path = getattr(args, "inputs_from", None)
    if not path:
        case_inputs.use(None)
        return
    positions = args.model_positions or case_inputs.DEFAULT_POSITIONS
    print(f"qconform: capturing the inputs of a {positions}-position reference decode of {path}", file=sys.stderr)
    from harness.model.checkpoint import open_checkpoint
    ck = open_checkpoint(path, verify=getattr(args, "verify_weights", "sampled"))
    case_inputs.use(case_inputs.capture(ck.weights, path, ck.sha256(), positions=positions))
