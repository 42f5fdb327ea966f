import subprocess
import sys


from cudasrc.signatures import kernel_signatures
from harness.toolchain.rust_literals import fill_format, kernel_sets, string_literals
from tests.seed import SEED_RS, seed_source


def test_plain_escapes_and_continuation():
    src = 'const A: &str = "x\\ty\\n\\\n      z\\x20w\\u{41}\\\\\\"";'
    (lit,) = string_literals(src)
    assert lit.text == 'x\ty\nz w' + 'A\\"'


def test_raw_strings_keep_backslashes_and_quotes():
    src = 'let s = r#"a\\n "quoted" b"#; let t = br##"x"#y"##;'
    lits = string_literals(src)
    assert [l.text for l in lits] == ['a\\n "quoted" b', 'x"#y']


def test_comments_chars_and_lifetimes_are_not_strings():
    src = "// \"not a string\"\n/* outer /* \"nested\" */ still comment */ fn f<'a>(c: char) { let q = '\"'; let e = '\\''; }\nconst S: &str = \"real\";"
    assert [l.text for l in string_literals(src)] == ["real"]


def test_format_template_fill_and_unfilled():
    text, seen, unfilled = fill_format("k{i}_x{{ int a={n:e}; {body} }}", {"i": 3, "n": 1.5})
    assert text == "k3_x{ int a=1.5; {body} }"
    assert seen == ("i", "n", "body") and unfilled == ("body",)


def test_negative_control_wrong_continuation_rule_would_change_text():
    # The continuation swallows the following indent: a decoder that kept it would differ.
    (lit,) = string_literals('"a\\\n    b"')
    assert lit.text == "ab" and lit.text != "a    b"


def test_seed_kernel_sets_are_named_and_complete():
    sets = {ks.name: ks for ks in kernel_sets(seed_source(), {"i": 0, "nt": 2})}
    for const in ("MOE_ROUTER_TOPK_KERNELS", "MOE_TWO_PASS_KERNELS", "MOE_SINGLE_PASS_KERNELS", "MOE_KERNELS",
                  "GEN_DEVICE_KERNELS"):
        assert const in sets and sets[const].complete and not sets[const].is_template
    gen = sets["GEN_DEVICE_KERNELS"]
    names = [s.name for s in kernel_signatures(gen.code)]
    assert names[0] == "gk_embed" and "gk_argmax_adv" in names and len(names) == 24
    assert sets["emit_marlin_q8_gemm"].complete and "const int NT=2;" in sets["emit_marlin_q8_gemm"].code
    # Templates whose placeholders are not given are reported, never guessed.
    assert any(not ks.complete and "cols" in ks.unfilled for ks in sets.values())


def test_seed_signatures_parse_with_exact_types():
    sets = {ks.name: ks for ks in kernel_sets(seed_source())}
    sigs = {s.name: s for s in kernel_signatures(sets["MOE_TWO_PASS_KERNELS"].code)}
    assert sigs["moe_qact"].ctypes == ("const float*", "signed char*", "signed char*", "float*", "int")
    single = {s.name: s for s in kernel_signatures(sets["MOE_SINGLE_PASS_KERNELS"].code)}
    assert single["moe_qact"].ctypes == ("const float*", "signed char*", "float*", "int")


def test_extract_cli_writes_cu_files(tmp_path):
    seed_source()
    out = tmp_path / "cu"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "extract", str(SEED_RS), "--out", str(out)],
                          capture_output=True, text=True, check=True)
    files = sorted(p.name for p in out.glob("*.cu"))
    assert "GEN_DEVICE_KERNELS.cu" in files and "MOE_SINGLE_PASS_KERNELS.cu" in files
    assert "emit_forward-1.cu" in files          # k0_qact + k0_q8dp4a with i=0
    assert "skipped emit_forward#9" in proc.stdout
    text = (out / "emit_forward-1.cu").read_text()
    assert "k0_q8dp4a" in text and "{i}" not in text and "#include <cuda_fp16.h>" in text


def test_extract_cli_rejects_bad_define(tmp_path):
    seed_source()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "extract", str(SEED_RS), "--out", str(tmp_path),
                           "--define", "oops"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--define: expected NAME=VALUE" in proc.stderr


def test_kernel_names_read_past_launch_bounds_and_comments():
    src = ('const K: &str = "__global__ void __launch_bounds__(256) k_a(float* x) { }\\n'
           '// __global__ void not_a_kernel(int n)\\n'
           '__global__ __launch_bounds__(128, 2) void k_b(const float* x, int n) { }";\n'
           'fn emit() -> String { format!("__global__ void k{i}_c(float* y) {{ }}\\n'
           '__global__ void __launch_bounds__(64) k{i}_d(int n) {{ {body} }}", i = 1) }\n')
    sets = {ks.name: ks for ks in kernel_sets(src, {"i": 7})}
    assert sets["K"].complete and sets["K"].kernels == ("k_a", "k_b")
    # an incomplete template keeps the placeholder-tolerant scan (and is never written out)
    tmpl = sets["emit"]
    assert not tmpl.complete and tmpl.unfilled == ("body",) and tmpl.kernels[0] == "k7_c"
    filled = {ks.name: ks for ks in kernel_sets(src, {"i": 7, "body": ""})}["emit"]
    assert filled.complete and filled.kernels == ("k7_c", "k7_d")
