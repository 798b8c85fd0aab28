"""Tests of ``precision explain`` (precision/cli/point_commands.py): text and JSON output, exit codes."""

import json

import pytest

from precision.cli import main
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import KERNEL_RECIPE

from cli_support import run



class TestExplain:
    def test_text_output(self, capsys):
        code, out, err = run(capsys, "explain", "kernel", "--pred", "10", "--target", "0")
        assert code == 0 and err == ""
        lines = out.splitlines()
        assert lines[0].startswith("variant  kernel on ieee")
        fields = dict(line.split(None, 1) for line in lines[:10])
        assert fields["fp32"].split()[0] == "-0x1.3c064a0000000p-44"
        assert fields["computed"].split()[0] == "-0x1.3c75ec0000000p-44" and "ulp" in fields["computed"]
        q = next(line.split() for line in lines if line.startswith("q "))
        assert q[1] == "0x1.7d00000000000p-15" and q[4] == "cancellation" and q[-1] == "yes"
        assert lines[-1].startswith("top cause: q = 1 - p: p rounds to 1 - 381 ulp(1)")

    def test_json_schema(self, capsys):
        code, out, err = run(capsys, "explain", "kernel", "--pred", "17", "--target", "1", "--gamma", "-2",
                             "--json")
        assert code == 0 and err == ""
        data = json.loads(out)
        assert {"variant", "machine", "format", "inputs", "exact", "exact_rounded", "computed", "err_ulp", "steps",
                "top_cause"} <= set(data)
        assert [s["step"] for s in data["steps"]] == list(KERNEL_RECIPE.plan().names)
        for s in data["steps"]:
            assert {"step", "computed", "exact", "local_ulp", "cause", "reaches_output"} <= set(s)
            assert isinstance(s["reaches_output"], bool)
        assert data["top_cause"]["step"] == "qg_lp" and data["top_cause"]["cause"] == "nan_propagation"
        assert set(data["top_cause"]) >= {"step", "cause", "local_ulp"}
        assert data["err_ulp"] == "inf" and data["computed"] == "nan"

    def test_fp16_machine_and_weight(self, capsys):
        code, out, _ = run(capsys, "explain", "naive-fp16", "--pred", "5", "--target", "0", "--format", "fp16",
                           "--json")
        assert code == 0 and json.loads(out)["format"] == "fp16"
        code, out, _ = run(capsys, "explain", "kernel-G7", "--pred", "0", "--target", "0", "--weight", "0x1p-127",
                           "--dout", "0x1p30", "--machine", "npu+ftz", "--json")
        top = json.loads(out)["top_cause"]
        assert code == 0 and (top["step"], top["cause"]) == ("weighted", "flush")

    @pytest.mark.parametrize("argv,word", [
        (["explain", "kernal", "--pred", "1", "--target", "0"], "variant="),
        (["explain", "kernel", "--pred", "abc", "--target", "0"], "--pred"),
        (["explain", "kernel", "--target", "0"], "--pred"),
        (["explain", "kernel", "--pred", "1", "--target", "0", "--count", "0"], "--count"),
        (["explain", "naive-fp16", "--pred", "1", "--target", "0"], "float16"),
        (["explain", "kernel", "--pred", "1e6", "--target", "0", "--format", "fp16"], "fp16"),
        (["explain", "kernel", "--pred", "1", "--target", "0", "--machine", "gpu"], "machine="),
        (["explain", "kernel", "--pred", "1", "--target", "0", "--format", "bf16"], "invalid choice"),
    ])
    def test_bad_input_one_line_exit_2(self, capsys, argv, word):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("precision: error: ") and word in err

    def test_help_shows_defaults_and_example(self, capsys):
        with pytest.raises(SystemExit):
            main(["explain", "--help"])
        out = capsys.readouterr().out
        flat = " ".join(out.split())
        assert "(default: 0.25)" in flat and "(default: ieee)" in flat and "(default: None)" not in flat
        assert "precision explain kernel --pred 10 --target 0" in flat
