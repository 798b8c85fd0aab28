"""Tests of the precision command line (exit codes, output, one-line errors)."""

import subprocess
import sys

import pytest

from precision.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class TestOracleCommand:
    def test_reference_example(self, capsys):
        code, out, err = run(capsys, "oracle", "--pred", "-0x1.4p+0", "--target", "0", "--alpha", "0.25",
                             "--gamma", "2", "--dout", "-0x1.8p+0", "--count", "6")
        assert code == 0 and err == ""
        lines = dict(line.split(None, 1) for line in out.splitlines())
        assert lines["exact"] == "0.05461392877887468806393589751893640399408"
        assert lines["fp32"].split()[0] == "0x1.bf65b60000000p-5"
        assert lines["fp16"].split()[0] == "0x1.bf80000000000p-5"
        assert lines["bf16"].split()[0] == "0x1.c000000000000p-5"
        assert lines["fp64"].split()[0] == "0x1.bf65b5c05ce5bp-5"

    @pytest.mark.parametrize("argv,word", [
        (["oracle", "--pred", "abc", "--target", "0"], "--pred"),
        (["oracle", "--target", "0"], "--pred"),
        (["oracle", "--pred", "1", "--target", "0", "--count", "0"], "--count"),
        (["oracle", "--pred", "nan", "--target", "0"], "finite"),
        (["oracle", "--pred", "1", "--target", "x"], "--target"),
        (["oracle", "--pred", "0x1.gp+0", "--target", "0"], "hex"),
        (["oracle", "--pred", "1", "--target", "0", "--gamma", "1e39"], "float32"),
        (["nosuchcommand"], "invalid choice"),
    ])
    def test_bad_arguments_one_line_exit_2(self, capsys, argv, word):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and word in err and "Traceback" not in err

    def test_console_script_exit_status(self):
        proc = subprocess.run([sys.executable, "-m", "precision.cli", "oracle", "--pred", "bad", "--target", "0"],
                              capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr.startswith("precision: error:")
