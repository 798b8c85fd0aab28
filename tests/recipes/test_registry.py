"""The generic variant registry (precision/recipes/registry.py): rows, recipe builders, the name grammar and the
threshold spellings, on an operator-neutral table with made-up bases, guards and parameters."""

import math

import pytest

from precision.errors import ParameterError
from precision.recipes.registry import NameGrammar, NameParameter, Variant, VariantTable, parse_threshold
from precision.recipes.steps import Recipe, RecipeCall, Step

GUARDS = ("H1", "H2", "H3")
ALL = frozenset(GUARDS)


def blend(machine, pred, target, dout, weight=None, k=1.0, reduction="none", *, count=None, **params):
    """A made-up variant function: what it was called with."""
    return dict(machine=machine, pred=pred, k=k, reduction=reduction, count=count, **params)


def other(machine, pred, target, dout, weight=None, k=1.0, reduction="none", **params):
    """A function without the count keyword."""
    return ("other", params)


def _width(value: str, name: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise ParameterError(f"variant={name!r}: width={value!r}; expected a positive int")
    return n


GRAMMAR = NameGrammar(
    {"plain": (frozenset(), "+"), "full": (ALL, "-")}, GUARDS, function=blend,
    parameters=(NameParameter("H2", "h2_limit", lambda v, n: parse_threshold(v, n, "H2"), guard="H2",
                              what="H2 limit", placeholder="<tau>"),
                NameParameter("width", "width", _width, guard="H3", placeholder="<n>")),
    help=(("full[H2=<tau>]", "full with an H2 limit"),), guard_hint="Hi")

RECIPE = Recipe("toy", [Step("out", ("x",), lambda m, c, k, x: x, "store", fmt="output")])


@pytest.fixture
def table():
    t = VariantTable("toy", grammar=GRAMMAR, unknown_hint=", or plain+Hi / full-Hi")
    t.add(Variant("plain", "plain", "no guard", blend, (("guards", frozenset()),)),
          recipe=lambda params: RecipeCall(RECIPE, RECIPE.config(), lambda m, i, n: None))
    t.add(Variant("full", "full", "every guard", blend, (("guards", ALL),)))
    t.add(Variant("reference", "golden", "the reference", other))
    return t


class TestRows:
    def test_names_get_and_listing(self, table):
        assert table.names() == ["plain", "full", "reference"]
        assert table.get("full") is table.rows["full"] and table.get(table.rows["full"]) is table.rows["full"]
        assert table.listing() == [("plain", "no guard"), ("full", "every guard"), ("reference", "the reference"),
                                   ("full[H2=<tau>]", "full with an H2 limit")]
        assert table.rows["full"].guards == ALL and table.rows["reference"].guards is None

    @pytest.mark.parametrize("name", ["nosuch", 3, None, "FULL"])
    def test_an_unknown_name_lists_the_known_ones(self, table, name):
        with pytest.raises(ParameterError) as err:
            table.get(name)
        assert str(err.value) == (f"variant={name!r} is unknown; expected one of plain, full, reference, or "
                                  "plain+Hi / full-Hi")

    def test_without_a_grammar_the_message_has_no_hint(self):
        t = VariantTable("bare")
        t.add(Variant("only", "kernel", "one", other))
        with pytest.raises(ParameterError, match=r"^variant='x' is unknown; expected one of only$"):
            t.get("x")
        assert t.listing() == [("only", "one")] and t.recipe_call("only") is None

    def test_calling_a_row_binds_its_params_and_passes_count_only_when_given(self, table):
        row = table.get("full-H1[width=4]")
        got = row("ieee", "x", "t", "d", None, 2.0, "none")
        assert got["count"] is None and got["width"] == 4 and got["guards"] == {"H2", "H3"}
        assert row("ieee", "x", "t", "d", count=7)["count"] == 7
        assert table.get("reference")("ieee", "x", "t", "d") == ("other", {})  # no count keyword: none passed

    def test_recipe_calls_by_function(self, table):
        assert table.recipe_call("plain").recipe is RECIPE
        assert table.recipe_call("plain+H1").recipe is RECIPE  # a parsed row of the same function
        assert table.recipe_call("reference") is None


class TestGrammar:
    def test_parsed_rows(self, table):
        row = table.get("plain+H3+h1[width=8]")
        assert (row.name, row.family, row.function) == ("plain+H3+h1[width=8]", "plain", blend)
        assert row.params == (("guards", frozenset({"H1", "H3"})), ("width", 8))
        assert row.description == "plain recipe with guards {H1, H3}, width=8"
        row = table.get("full[H2=2^-4, width=3]")
        assert dict(row.params) == {"guards": ALL, "h2_limit": 0.0625, "width": 3}
        assert table.get(" full-H3 ").guards == {"H1", "H2"}

    @pytest.mark.parametrize("name, message", [
        ("full+H1", "variant='full+H1': +H1 on full; expected full-Hi (guards are removed from full)"),
        ("plain-H2", "variant='plain-H2': -H2 on plain; expected plain+Hi (guards are added to plain)"),
        ("plain+H1+h1", "variant='plain+H1+h1': H1 named twice"),
        ("full[size=3]", "variant='full[size=3]': parameter 'size=3' is not understood; expected H2=<tau> and/or "
                         "width=<n>, once each"),
        ("full[width=2,width=3]", "variant='full[width=2,width=3]': parameter 'width=3' is not understood; expected "
                                  "H2=<tau> and/or width=<n>, once each"),
        ("full[H2]", "variant='full[H2]': parameter 'H2' is not understood; expected H2=<tau> and/or width=<n>, "
                     "once each"),
        ("full-H2[H2=1/8]", "variant='full-H2[H2=1/8]': H2 limit given but H2 is off; enable H2 or drop H2="),
        ("plain[width=2]", "variant='plain[width=2]': width given but H3 is off; enable H3 or drop width="),
        ("full[H2=abc]", "variant='full[H2=abc]': H2='abc' is not a threshold; expected e.g. 1/64, 2^-6, 0.015625, "
                         "never, always"),
        ("full[H2=-1/8]", "variant='full[H2=-1/8]': H2='-1/8' must be >= 0"),
        ("full[width=0]", "variant='full[width=0]': width='0'; expected a positive int"),
    ])
    def test_errors_are_one_line(self, table, name, message):
        with pytest.raises(ParameterError) as err:
            table.get(name)
        assert str(err.value) == message

    @pytest.mark.parametrize("name", ["plain+H4", "plain+G1", "full-H1[", "Plain", "full[x]]"])
    def test_not_the_form_is_unknown(self, table, name):
        with pytest.raises(ParameterError, match="is unknown"):
            table.get(name)

    def test_canonical_names_of_guard_sets(self):
        assert GRAMMAR.guard_name(set()) == "plain" and GRAMMAR.guard_name(ALL) == "full"
        assert GRAMMAR.guard_name({"H3"}) == "plain+H3" and GRAMMAR.guard_name({"H1", "H3"}) == "full-H2"
        assert GRAMMAR.matches("full-H1[anything]") and not GRAMMAR.matches("fullish")

    def test_guard_ids_of_different_lengths(self):
        g = NameGrammar({"lo": (frozenset(), "+"), "hi": (frozenset({"G1", "G10"}), "-")}, ("G1", "G10"),
                        function=other)
        assert g.parse("lo+G10").guards == {"G10"} and g.parse("lo+G1+G10").guards == {"G1", "G10"}

    def test_a_single_parameter_message(self):
        g = NameGrammar({"b": (frozenset({"X"}), "-")}, ("X",), function=other,
                        parameters=(NameParameter("n", "n", lambda v, name: int(v)),))
        with pytest.raises(ParameterError, match=r"expected n=<value>, once each$"):
            g.parse("b[m=1]")
        assert dict(g.parse("b[n=2]").params)["n"] == 2  # no guard needed


class TestThreshold:
    @pytest.mark.parametrize("spelling, value", [
        ("1/16", 0.0625), ("2^-4", 0.0625), ("2**-4", 0.0625), ("2^(-4)", 0.0625), ("0.0625", 0.0625),
        ("0x1p-4", 0.0625), (" 1/64 ", 0.015625), ("0.1", 0.1), ("0", 0.0), ("2^3", 8.0),
        ("never", "never"), ("None", "never"), ("always", "always"), ("inf", "always"), ("+INF", "always"),
    ])
    def test_spellings(self, spelling, value):
        assert parse_threshold(spelling, "v", "T") == value

    @pytest.mark.parametrize("spelling", ["", "abc", "1/0", "nan", "2^x", "0xg", "9" * 400])
    def test_not_a_threshold(self, spelling):
        with pytest.raises(ParameterError, match=r"^variant='v': T=.* is not a threshold; expected e\.g\. 1/64"):
            parse_threshold(spelling, "v", "T")

    def test_negative_and_a_check_of_its_own(self):
        with pytest.raises(ParameterError, match=r"^variant='v': T='-0x1p-4' must be >= 0$"):
            parse_threshold("-0x1p-4", "v", "T")

        def below_one(value):
            if value >= 1:
                raise ParameterError("too big")
            return math.sqrt(value)
        assert parse_threshold("1/4", "v", "T", below_one) == 0.5
        with pytest.raises(ParameterError, match="must be >= 0"):  # the check's refusal, in the grammar's words
            parse_threshold("2", "v", "T", below_one)


class TestRegister:
    def test_register_replace_remove_restore(self, table):
        def mine(machine, pred, *args, **kwargs):
            return "mine"

        call = RecipeCall(RECIPE, RECIPE.config(), lambda m, i, n: None)
        row = table.register("mine", mine, "a candidate", params={"b": 2, "a": 1}, recipe=call)
        assert (row.family, row.params, row.source) == ("candidate", (("a", 1), ("b", 2)), None)
        assert table.names()[-1] == "mine" and table.recipe_call("mine") is call
        with pytest.raises(ParameterError, match=r"^variant='mine' already exists; pick another name or pass "
                                                 r"replace=True$"):
            table.register("mine", mine, "again")
        assert table.register("mine", mine, "replaced", replace=True).description == "replaced"
        taken = table.remove("mine")
        assert taken[0].description == "replaced" and "mine" not in table.rows
        assert table.recipe_builder(taken[0]) is None  # no other row has its function: its builder went too
        table.restore(*taken)
        assert table.rows["mine"] is taken[0] and table.recipe_call("mine") is call
        assert table.remove("nosuch") is None

    def test_a_builder_shared_by_another_row_stays(self, table):
        table.register("mine", blend, "a candidate")
        table.remove("mine")
        assert table.recipe_call("plain") is not None  # plain's function is blend too

    @pytest.mark.parametrize("name, message", [
        ("plain", "variant='plain' already exists"), ("plain+H2", "variant='plain+H2' already exists"),
        ("full[width=4]", "already exists"), ("", "name=''; expected a non-empty name without spaces"),
        ("a b", "name='a b'; expected"), (None, "name=None; expected"),
    ])
    def test_taken_and_bad_names(self, table, name, message):
        with pytest.raises(ParameterError, match=message.replace("[", r"\[").replace("+", r"\+")):
            table.register(name, other, "x")

    def test_bad_function_and_recipe(self, table):
        with pytest.raises(ParameterError, match=r"^function=3 is not callable$"):
            table.register("x", 3, "x")
        with pytest.raises(ParameterError, match=r"^recipe=3; expected a RecipeCall or a function params -> "):
            table.register("x", other, "x", recipe=3)

    def test_the_registration_hook_decides_and_names_the_source(self, table, tmp_path):
        seen = []

        def hook(name, function, exists):
            seen.append((name, exists))
            return (lambda *a, **k: "wrapped"), tmp_path / "p.py"

        with table.hooked(hook):
            row = table.register("plain", other, "over a built-in")  # the hook, not the table, refuses clashes
            table.register("fresh", other, "new")
        assert seen == [("plain", True), ("fresh", False)] and table.registration_hook is None
        assert row.source == tmp_path / "p.py" and row.function("ieee") == "wrapped"

    def test_another_tables_register_during_a_plugin_import_is_refused(self, table):
        neighbour = VariantTable("neighbour")
        with table.hooked(lambda name, function, exists: (function, None)):
            with pytest.raises(ParameterError) as err:
                neighbour.register("x", other, "x")
        assert str(err.value) == ("variant 'x' is registered for the operator neighbour but the plugin is loaded for "
                                  "toy; register it with toy's register_variant, or load the plugin for neighbour "
                                  "(--operator neighbour)")
        assert neighbour.rows == {} and neighbour.register("x", other, "x").name == "x"  # outside an import: fine
