"""The language registry: one table row per source language twinspect parses.

Each :class:`LanguageSpec` row holds everything language-specific the code pipeline needs:

* **detection**: file extensions, ``--language`` aliases and shebang interpreters;
* **grammar**: where its tree-sitter grammar comes from: a single-language wheel
  (``tree-sitter-python``, ``-java``, ``-c``, ``-cpp``, as before) or the offline bundle of
  ``tree-sitter-language-pack`` 0.13 (every other language; its 1.x releases download parsers at
  first use and are not used);
* **fragments** (:mod:`twinspect.code.fragments`): the node types that are functions/methods, the
  named scopes that qualify their names (classes, ``impl``, namespaces, objects), comment node
  types and the separator of qualified names;
* **blocks** (:mod:`twinspect.code.blocks`): the node types whose children form statement
  sequences, the fields of those nodes that still hold statements, import-like statements and
  literal collections;
* **tokens** (:mod:`twinspect.code.normalize`): the regular expressions of string and numeric
  literals, identifiers and multi-character operators, and the keyword list: together the token
  classes of the T1/T2 views (identifiers -> ``ID``, literals -> ``LIT``, keywords and operators
  kept).

Rows for Python, Java, C and C++ reproduce the behaviour of the previous per-module tables exactly
(same grammars, same node types, same token patterns). The other rows (JavaScript, TypeScript, TSX,
Go, Rust, C#, Kotlin, Swift, Ruby, PHP, Scala) follow the same rules: anonymous functions are
fragments where they are the language's usual way to write a function body (JavaScript/TypeScript
function expressions and arrow functions, Go function literals, PHP closures), not where they are
expression lambdas (Rust closures, Kotlin/Swift/Scala lambdas, C# lambdas, Ruby blocks).

:data:`UNPARSED_EXTENSIONS` / :data:`UNPARSED_INTERPRETERS` name source languages twinspect
recognises but does not parse, so a scan can say which files it ignored
(:attr:`twinspect.code.files.ScanStats.unsupported_files`). Parsers and compiled queries are built
once per process and reused.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter

from twinspect.errors import InputError


# ---------------------------------------------------------------------------------------------
# Token classes shared by several rows (regular-expression source text)
# ---------------------------------------------------------------------------------------------
def operators(*ops: str) -> str:
    """Regex alternation of literal operators, longest first (so ``<<=`` wins over ``<<``).

    Args:
        ops: operator spellings.

    Returns:
        Regex source text such as ``"<<=|<<|=="``.
    """
    return "|".join(re.escape(o) for o in sorted(ops, key=len, reverse=True))


# Numbers: the C "pp-number" shape (also fits Python and Java): a digit or .digit followed by
# letters, digits, dots, underscores and exponent signs; C++ adds ' digit separators.
NUM = r"\.?\d(?:[eEpP][+-]|[\w.])*"
NUM_CPP = r"\.?\d(?:[eEpP][+-]|'\w|[\w.])*"
#: Numbers of the languages with range operators (``0..n``) and methods on literals (``3.times``):
#: a dot continues a number only before a digit.
NUM_DOT_DIGIT = r"\.?\d(?:[eEpP][+-]|\w|\.\d)*"
ID = r"[^\W\d]\w*"
ID_DOLLAR = r"(?:[^\W\d]|\$)[\w$]*"
ID_BACKTICK = r"`[^`\n]+`|[^\W\d]\w*"

PY_STR = (
    r"[rRbBuUfFtT]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\""
    r"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\")"
)
JAVA_STR = r"\"\"\"(?:\\.|[^\\])*?\"\"\"|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])+'"
C_STR = r"(?:u8|u|U|L)?(?:\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])+')"
CPP_STR = r"(?:u8|u|U|L)?R\"(?P<delim>[^()\\\s]{0,16})\((?:.|\n)*?\)(?P=delim)\"|" + C_STR
_DQ = r"\"(?:\\.|[^\"\\\n])*\""  # one-line double-quoted string
_SQ = r"'(?:\\.|[^'\\\n])*'"  # one-line single-quoted string
_CHAR = r"'(?:\\.[^'\\\n]*|[^'\\\n])'"  # a character literal (Go rune, Rust/C#/Kotlin/Scala char)
_TRIPLE = r"\"\"\"(?:\\.|[^\\])*?\"\"\""
JS_STR = _DQ + "|" + _SQ + r"|`(?:\\.|[^\\`])*`"
GO_STR = _DQ + r"|`[^`]*`|" + _CHAR
RUST_STR = r"b?r(?P<hashes>#*)\"(?:.|\n)*?\"(?P=hashes)|b?\"(?:\\.|[^\"\\])*\"|b?" + _CHAR
RUST_STR_FAST = r"b?r\"[^\"]*\"|b?\"(?:\\.|[^\"\\])*\"|b?" + _CHAR
CS_STR = r"\"\"\"(?:.|\n)*?\"\"\"|\$?@\$?\"(?:\"\"|[^\"])*\"|\$?" + _DQ + "|" + _CHAR
KOTLIN_STR = _TRIPLE + "|" + _DQ + "|" + _CHAR
SWIFT_STR = r"#+\"(?:.|\n)*?\"#+|" + _TRIPLE + "|" + _DQ
RUBY_STR = r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'"
PHP_STR = r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'"
SCALA_STR = _TRIPLE + "|" + _DQ + "|" + _CHAR

PY_OPS = operators("**=", "//=", "<<=", ">>=", "...", "->", ":=", "**", "//", "<<", ">>", "<=", ">=",
                   "==", "!=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=")
JAVA_OPS = operators("<<=", "...", "->", "::", "++", "--", "&&", "||", "==", "!=", "<=", ">=", "+=",
                     "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<")
C_OPS = operators("<<=", "...", "->*", "<=>", "->", "::", ".*", "++", "--", "&&", "||", "==", "!=",
                  "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", "##")
_ASSIGN_OPS = ("+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=")
JS_OPS = operators("===", "!==", "**=", "...", "&&=", "||=", "??=", "=>", "==", "!=", "<=", ">=", "&&",
                   "||", "??", "?.", "++", "--", "**", "<<", *_ASSIGN_OPS)
GO_OPS = operators(":=", "...", "<-", "&^=", "&^", "++", "--", "&&", "||", "==", "!=", "<=", ">=", "<<",
                   *_ASSIGN_OPS)
RUST_OPS = operators("::", "->", "=>", "..=", "...", "..", "&&", "||", "==", "!=", "<=", ">=", "<<",
                     *_ASSIGN_OPS)
CS_OPS = operators("??=", "??", "?.", "=>", "::", "->", "++", "--", "&&", "||", "==", "!=", "<=", ">=",
                   "<<", *_ASSIGN_OPS)
KOTLIN_OPS = operators("===", "!==", "?.", "?:", "!!", "::", "..<", "..", "->", "==", "!=", "<=", ">=",
                       "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=")
SWIFT_OPS = operators("===", "!==", "...", "..<", "->", "??", "==", "!=", "<=", ">=", "&&", "||", "<<",
                      *_ASSIGN_OPS)
RUBY_OPS = operators("**", "<=>", "===", "==", "!=", "=~", "!~", "<=", ">=", "&&", "||", "<<", "||=",
                     "&&=", "...", "..", "::", "=>", "->", "&.", "+=", "-=", "*=", "/=", "%=", "**=")
PHP_OPS = operators("===", "!==", "<=>", "**", "??=", "??", "?->", "->", "=>", "::", "++", "--", "&&",
                    "||", "==", "!=", "<>", "<=", ">=", ".=", "<<", "...", *_ASSIGN_OPS)
SCALA_OPS = operators("=>", "<-", "->", "::", "++", "==", "!=", "<=", ">=", "&&", "||", "<:", ">:",
                      "<<", "+=", "-=")


def _kw(words: str) -> frozenset[str]:
    return frozenset(words.split())


# ---------------------------------------------------------------------------------------------
# Keywords (hard keywords and literal keywords such as true/null; type keywords where the
# language has them). Contextual keywords that are mostly names are identifiers.
# ---------------------------------------------------------------------------------------------
import keyword as _keyword  # noqa: E402  (stdlib; kept next to its only use)

PYTHON_KEYWORDS = frozenset(_keyword.kwlist)
JAVA_KEYWORDS = _kw(
    """abstract assert boolean break byte case catch char class const continue default do double
    else enum extends final finally float for goto if implements import instanceof int interface
    long native new package private protected public return short static strictfp super switch
    synchronized this throw throws transient try void volatile while true false null"""
)
C_KEYWORDS = _kw(
    """auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local alignas alignof bool constexpr false
    nullptr static_assert thread_local true typeof typeof_unqual"""
)
CPP_KEYWORDS = C_KEYWORDS | _kw(
    """and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept consteval
    constinit const_cast co_await co_return co_yield decltype delete dynamic_cast explicit export
    friend mutable namespace new noexcept not not_eq operator or or_eq private protected public
    reinterpret_cast requires static_cast template this throw try typeid typename using virtual
    wchar_t xor xor_eq override final"""
)
JS_KEYWORDS = _kw(
    """async await break case catch class const continue debugger default delete do else export
    extends false finally for function if import in instanceof let new null return static super
    switch this throw true try typeof undefined var void while with yield"""
)
TS_KEYWORDS = JS_KEYWORDS | _kw(
    """abstract any as boolean declare enum implements interface keyof namespace never number
    private protected public readonly string symbol type unknown"""
)
GO_KEYWORDS = _kw(
    """break case chan const continue default defer else fallthrough for func go goto if import
    interface map package range return select struct switch type var true false nil iota bool
    byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint
    uint8 uint16 uint32 uint64 uintptr any"""
)
RUST_KEYWORDS = _kw(
    """as async await break const continue crate dyn else enum extern false fn for if impl in let
    loop match mod move mut pub ref return self Self static struct super trait true type unsafe use
    where while bool char str i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64"""
)
CS_KEYWORDS = _kw(
    """abstract as base bool break byte case catch char checked class const continue decimal default
    delegate do double else enum event explicit extern false finally fixed float for foreach goto if
    implicit in int interface internal is lock long namespace new null object operator out override
    params private protected public readonly ref return sbyte sealed short sizeof stackalloc static
    string struct switch this throw true try typeof uint ulong unchecked unsafe ushort using virtual
    void volatile while async await var"""
)
KOTLIN_KEYWORDS = _kw(
    """as break class continue do else false for fun if in interface is null object package return
    super this throw true try typealias typeof val var when while"""
)
SWIFT_KEYWORDS = _kw(
    """associatedtype class deinit enum extension fileprivate func import init inout internal let
    open operator private protocol public rethrows static struct subscript typealias var break case
    catch continue default defer do else fallthrough for guard if in repeat return throw switch
    where while as false is nil self Self super throws true try await async"""
)
RUBY_KEYWORDS = _kw(
    """BEGIN END alias and begin break case class def defined? do else elsif end ensure false for if
    in module next nil not or redo rescue retry return self super then true undef unless until when
    while yield __FILE__ __LINE__ __method__"""
)
PHP_KEYWORDS = _kw(
    """abstract and array as break callable case catch class clone const continue declare default do
    echo else elseif empty enddeclare endfor endforeach endif endswitch endwhile enum extends final
    finally fn for foreach function global goto if implements include include_once instanceof
    insteadof interface isset list match namespace new or print private protected public readonly
    require require_once return static switch throw trait try unset use var while xor yield true
    false null TRUE FALSE NULL self parent int float bool string void mixed never iterable object"""
)
SCALA_KEYWORDS = _kw(
    """abstract case catch class def do else extends false final finally for forSome if implicit
    import lazy match new null object override package private protected return sealed super this
    throw trait true try type val var while with yield given using then enum export"""
)


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LanguageSpec:
    """Everything language-specific about one parsed language (one row of :data:`REGISTRY`).

    Attributes:
        name: canonical name (``"python"``, ``"javascript"``, ``"csharp"``...).
        extensions: file extensions, lower case with the dot.
        grammar: ``"module:NAME"`` (a single-language wheel whose ``language()`` gives the grammar)
            or ``"pack:NAME"`` (``tree_sitter_language_pack.get_language(NAME)``).
        function_types: node types mined as function fragments.
        scope_types: named scopes qualifying fragment names (classes, ``impl``, namespaces...).
        comment_types: comment node types (blanked before tokenisation).
        name_separator: separator of qualified names (``Class.method``, ``A::f``).
        sequence_types: node types whose children are statement sequences (block granularity).
        statement_fields: fields of those nodes whose children are statements too (e.g. the
            ``body`` of a JavaScript ``case``); other fields (a ``case`` value) are not statements.
        import_types: import-like statements (compared on T1 tokens in block granularity).
        collection_types: literal collections split into elements in data statements.
        transparent_types: children of a sequence that are neither statements nor separators
            (comments are always transparent).
        keywords: words kept verbatim in the T2 view.
        string: regex of string and character literals (may use named groups/back-references).
        number: regex of numeric literals.
        identifier: regex of identifiers.
        operators: regex alternation of multi-character operators (any other non-space,
            non-word character is a one-character token).
        fast_string: ``string`` without back-references, used unless ``slow_marker`` occurs in
            the code ("" = ``string`` has none).
        slow_marker: substring of code that needs ``string``'s back-references (C++ ``R"``).
        indentation: Python-style layout tokens (``<INDENT>``/``<DEDENT>``).
        classify: ``"prefix"`` (literals and identifiers told by their first/last character, the
            original rule of Python/Java/C/C++) or ``"regex"`` (full match against ``string`` /
            ``number`` and ``identifier``).
        aliases: other accepted spellings of the name for ``--language``.
        interpreters: shebang interpreter names of scripts in this language.
    """

    name: str
    extensions: tuple[str, ...]
    grammar: str
    function_types: tuple[str, ...]
    scope_types: tuple[str, ...]
    comment_types: tuple[str, ...]
    name_separator: str
    sequence_types: tuple[str, ...]
    keywords: frozenset[str]
    string: str
    identifier: str
    operators: str
    number: str = NUM
    statement_fields: frozenset[str] = frozenset()
    import_types: frozenset[str] = frozenset()
    collection_types: frozenset[str] = frozenset()
    transparent_types: frozenset[str] = frozenset()
    fast_string: str = ""
    slow_marker: str = ""
    indentation: bool = False
    classify: str = "regex"
    aliases: tuple[str, ...] = ()
    interpreters: tuple[str, ...] = field(default=())


_C_PREPROC_SEQ = ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif")
_C_IMPORTS = frozenset({"preproc_include", "preproc_def", "preproc_function_def", "preproc_call"})
_JS_FUNCS = (
    "function_declaration", "generator_function_declaration", "function_expression", "generator_function",
    "arrow_function", "method_definition",
)
_JS_SEQ = ("program", "statement_block", "class_body", "switch_case", "switch_default")
_TS_SCOPES = ("class_declaration", "abstract_class_declaration", "class", "interface_declaration",
              "internal_module", "module")


def _ts(name: str, extensions: tuple[str, ...], aliases: tuple[str, ...], interpreters: tuple[str, ...]) -> LanguageSpec:
    return LanguageSpec(
        name=name, extensions=extensions, grammar=f"pack:{name}", function_types=_JS_FUNCS,
        scope_types=_TS_SCOPES, comment_types=("comment", "html_comment"), name_separator=".",
        sequence_types=(*_JS_SEQ, "enum_body"), statement_fields=frozenset({"body"}),
        import_types=frozenset({"import_statement"}), collection_types=frozenset({"array", "object"}),
        keywords=TS_KEYWORDS, string=JS_STR, identifier=ID_DOLLAR, operators=JS_OPS,
        number=NUM_DOT_DIGIT, aliases=aliases, interpreters=interpreters,
    )


REGISTRY: dict[str, LanguageSpec] = {
    spec.name: spec
    for spec in (
        LanguageSpec(
            name="python", extensions=(".py", ".pyi"), grammar="module:tree_sitter_python",
            function_types=("function_definition",), scope_types=("class_definition",),
            comment_types=("comment",), name_separator=".", sequence_types=("module", "block"),
            import_types=frozenset({"import_statement", "import_from_statement", "future_import_statement"}),
            collection_types=frozenset({"dictionary", "list", "tuple", "set", "concatenated_string"}),
            keywords=PYTHON_KEYWORDS, string=PY_STR, identifier=ID, operators=PY_OPS, indentation=True,
            classify="prefix", aliases=("py",),
            interpreters=("python", "python2", "python3", "pypy", "pypy3"),
        ),
        LanguageSpec(
            name="java", extensions=(".java",), grammar="module:tree_sitter_java",
            function_types=("method_declaration", "constructor_declaration", "compact_constructor_declaration"),
            scope_types=("class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
                         "annotation_type_declaration"),
            comment_types=("line_comment", "block_comment"), name_separator=".",
            sequence_types=("program", "block", "constructor_body", "class_body", "interface_body",
                            "enum_body_declarations", "annotation_type_body", "switch_block",
                            "switch_block_statement_group"),
            import_types=frozenset({"import_declaration", "package_declaration", "module_declaration"}),
            collection_types=frozenset({"array_initializer"}), transparent_types=frozenset({"switch_label"}),
            keywords=JAVA_KEYWORDS, string=JAVA_STR, identifier=ID_DOLLAR, operators=JAVA_OPS, classify="prefix",
        ),
        LanguageSpec(
            name="c", extensions=(".c", ".h"), grammar="module:tree_sitter_c",
            function_types=("function_definition",), scope_types=(), comment_types=("comment",),
            name_separator="::",
            sequence_types=("translation_unit", "compound_statement", "case_statement", "field_declaration_list",
                            *_C_PREPROC_SEQ),
            import_types=_C_IMPORTS, collection_types=frozenset({"initializer_list"}),
            keywords=C_KEYWORDS, string=C_STR, identifier=ID, operators=C_OPS, classify="prefix",
        ),
        LanguageSpec(
            name="cpp", extensions=(".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++"),
            grammar="module:tree_sitter_cpp", function_types=("function_definition",),
            scope_types=("class_specifier", "struct_specifier", "union_specifier"), comment_types=("comment",),
            name_separator="::",
            sequence_types=("translation_unit", "compound_statement", "case_statement", "field_declaration_list",
                            "declaration_list", *_C_PREPROC_SEQ),
            import_types=_C_IMPORTS | {"using_declaration", "namespace_alias_definition"},
            collection_types=frozenset({"initializer_list"}),
            keywords=CPP_KEYWORDS, string=CPP_STR, number=NUM_CPP, identifier=ID, operators=C_OPS,
            fast_string=C_STR, slow_marker='R"', classify="prefix", aliases=("c++", "cxx", "cc"),
        ),
        LanguageSpec(
            name="javascript", extensions=(".js", ".mjs", ".cjs", ".jsx"), grammar="pack:javascript",
            function_types=_JS_FUNCS, scope_types=("class_declaration", "class"),
            comment_types=("comment", "html_comment"), name_separator=".", sequence_types=_JS_SEQ,
            statement_fields=frozenset({"body"}), import_types=frozenset({"import_statement"}),
            collection_types=frozenset({"array", "object"}), keywords=JS_KEYWORDS, string=JS_STR,
            identifier=ID_DOLLAR, operators=JS_OPS, number=NUM_DOT_DIGIT, aliases=("js", "node"),
            interpreters=("node", "nodejs"),
        ),
        _ts("typescript", (".ts", ".mts", ".cts"), ("ts",), ("ts-node",)),
        _ts("tsx", (".tsx",), (), ()),
        LanguageSpec(
            name="go", extensions=(".go",), grammar="pack:go",
            function_types=("function_declaration", "method_declaration", "func_literal"), scope_types=(),
            comment_types=("comment",), name_separator=".",
            sequence_types=("source_file", "statement_list", "expression_case", "default_case", "type_case",
                            "communication_case"),
            import_types=frozenset({"import_declaration", "package_clause"}),
            collection_types=frozenset({"literal_value"}), keywords=GO_KEYWORDS, string=GO_STR, identifier=ID,
            operators=GO_OPS, number=NUM_DOT_DIGIT, aliases=("golang",),
        ),
        LanguageSpec(
            name="rust", extensions=(".rs",), grammar="pack:rust", function_types=("function_item",),
            scope_types=("impl_item", "trait_item", "mod_item"), comment_types=("line_comment", "block_comment"),
            name_separator="::", sequence_types=("source_file", "block", "declaration_list", "match_block"),
            import_types=frozenset({"use_declaration", "extern_crate_declaration"}),
            collection_types=frozenset({"array_expression"}), keywords=RUST_KEYWORDS, string=RUST_STR,
            fast_string=RUST_STR_FAST, slow_marker="r#", identifier=ID, operators=RUST_OPS, number=NUM_DOT_DIGIT,
            aliases=("rs",),
        ),
        LanguageSpec(
            name="csharp", extensions=(".cs",), grammar="pack:csharp",
            function_types=("method_declaration", "constructor_declaration", "destructor_declaration",
                            "local_function_statement", "operator_declaration", "conversion_operator_declaration",
                            "accessor_declaration"),
            scope_types=("class_declaration", "struct_declaration", "interface_declaration", "record_declaration",
                         "enum_declaration", "namespace_declaration", "file_scoped_namespace_declaration"),
            comment_types=("comment",), name_separator=".",
            sequence_types=("compilation_unit", "block", "declaration_list", "switch_section"),
            import_types=frozenset({"using_directive"}),
            collection_types=frozenset({"initializer_expression", "collection_expression"}),
            keywords=CS_KEYWORDS, string=CS_STR, identifier=r"@?[^\W\d]\w*", operators=CS_OPS,
            number=NUM_DOT_DIGIT, aliases=("c#", "cs"),
        ),
        LanguageSpec(
            name="kotlin", extensions=(".kt", ".kts"), grammar="pack:kotlin",
            function_types=("function_declaration", "secondary_constructor", "anonymous_function", "getter",
                            "setter"),
            scope_types=("class_declaration", "object_declaration", "companion_object"),
            comment_types=("line_comment", "multiline_comment"), name_separator=".",
            sequence_types=("source_file", "statements", "class_body"),
            import_types=frozenset({"package_header", "import_list", "import_header"}),
            collection_types=frozenset({"collection_literal"}), keywords=KOTLIN_KEYWORDS, string=KOTLIN_STR,
            identifier=ID_BACKTICK, operators=KOTLIN_OPS, number=NUM_DOT_DIGIT, aliases=("kt",),
            interpreters=("kotlin", "kscript"),
        ),
        LanguageSpec(
            name="swift", extensions=(".swift",), grammar="pack:swift",
            function_types=("function_declaration", "init_declaration", "deinit_declaration"),
            scope_types=("class_declaration", "protocol_declaration"),
            comment_types=("comment", "multiline_comment"), name_separator=".",
            sequence_types=("source_file", "statements", "class_body", "protocol_body", "enum_class_body"),
            import_types=frozenset({"import_declaration"}),
            collection_types=frozenset({"array_literal", "dictionary_literal"}), keywords=SWIFT_KEYWORDS,
            string=SWIFT_STR, identifier=r"\$\w+|" + ID_BACKTICK, operators=SWIFT_OPS, number=NUM_DOT_DIGIT,
            interpreters=("swift",),
        ),
        LanguageSpec(
            name="ruby", extensions=(".rb", ".rake", ".gemspec", ".ru"), grammar="pack:ruby",
            function_types=("method", "singleton_method"), scope_types=("class", "module", "singleton_class"),
            comment_types=("comment",), name_separator=".",
            sequence_types=("program", "body_statement", "block_body", "then", "else", "do", "ensure"),
            collection_types=frozenset({"array", "hash"}), keywords=RUBY_KEYWORDS, string=RUBY_STR,
            identifier=r"(?:@@?|\$)?[^\W\d]\w*(?:[?!](?![=~]))?", operators=RUBY_OPS, number=NUM_DOT_DIGIT,
            aliases=("rb",), interpreters=("ruby", "jruby"),
        ),
        LanguageSpec(
            name="php", extensions=(".php",), grammar="pack:php",
            function_types=("function_definition", "method_declaration", "anonymous_function"),
            scope_types=("class_declaration", "interface_declaration", "trait_declaration", "enum_declaration",
                         "namespace_definition"),
            comment_types=("comment",), name_separator="::",
            sequence_types=("program", "compound_statement", "declaration_list", "case_statement",
                            "default_statement", "colon_block"),
            import_types=frozenset({"namespace_use_declaration", "namespace_definition"}),
            collection_types=frozenset({"array_creation_expression"}), keywords=PHP_KEYWORDS, string=PHP_STR,
            identifier=r"\$?[^\W\d]\w*", operators=PHP_OPS, number=NUM_DOT_DIGIT, interpreters=("php",),
        ),
        LanguageSpec(
            name="scala", extensions=(".scala", ".sc"), grammar="pack:scala", function_types=("function_definition",),
            scope_types=("class_definition", "object_definition", "trait_definition", "enum_definition",
                         "extension_definition"),
            comment_types=("comment", "block_comment"), name_separator=".",
            sequence_types=("compilation_unit", "template_body", "block", "indented_block", "case_block"),
            import_types=frozenset({"package_clause", "import_declaration"}), keywords=SCALA_KEYWORDS,
            string=SCALA_STR, identifier=ID_BACKTICK, operators=SCALA_OPS, number=NUM_DOT_DIGIT,
            interpreters=("scala", "amm"),
        ),
    )
}

#: Languages twinspect can mine fragments from (registry order).
LANGUAGES: tuple[str, ...] = tuple(REGISTRY)

#: File extension (lower case, with the dot) -> language name.
EXTENSIONS: dict[str, str] = {ext: spec.name for spec in REGISTRY.values() for ext in spec.extensions}

#: Shebang interpreter (base name, version digits kept) -> language name.
INTERPRETERS: dict[str, str] = {i: spec.name for spec in REGISTRY.values() for i in spec.interpreters}

#: Source languages twinspect recognises by extension but does not parse (counted, never mined).
UNPARSED_EXTENSIONS: dict[str, str] = {
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "shell", ".ps1": "powershell",
    ".pl": "perl", ".pm": "perl", ".lua": "lua", ".hs": "haskell", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".clj": "clojure", ".cljs": "clojure", ".cljc": "clojure", ".dart": "dart",
    ".m": "objective-c/matlab", ".mm": "objective-c++", ".r": "r", ".jl": "julia", ".groovy": "groovy",
    ".gradle": "groovy", ".vue": "vue", ".svelte": "svelte", ".fs": "fsharp", ".fsx": "fsharp",
    ".ml": "ocaml", ".mli": "ocaml", ".zig": "zig", ".nim": "nim", ".f90": "fortran", ".f95": "fortran",
    ".cob": "cobol", ".cbl": "cobol", ".pas": "pascal", ".sql": "sql", ".elm": "elm", ".cu": "cuda",
    ".cuh": "cuda", ".vb": "visual-basic", ".coffee": "coffeescript", ".cr": "crystal", ".sol": "solidity",
    ".tcl": "tcl", ".hx": "haxe", ".gd": "gdscript", ".asm": "assembly", ".lisp": "lisp", ".el": "emacs-lisp",
    ".scm": "scheme", ".rkt": "racket", ".pyx": "cython", ".pxd": "cython", ".ino": "arduino",
    ".vhd": "vhdl", ".vhdl": "vhdl", ".adb": "ada", ".ads": "ada", ".purs": "purescript", ".gleam": "gleam",
    ".odin": "odin", ".awk": "awk", ".raku": "raku", ".nix": "nix", ".glsl": "glsl", ".hlsl": "hlsl",
}

#: Shebang interpreters of languages twinspect does not parse.
UNPARSED_INTERPRETERS: dict[str, str] = {
    "sh": "shell", "bash": "shell", "zsh": "shell", "ksh": "shell", "dash": "shell", "fish": "shell",
    "perl": "perl", "lua": "lua", "Rscript": "r", "tclsh": "tcl", "awk": "awk", "gawk": "awk",
    "julia": "julia", "elixir": "elixir", "escript": "erlang", "runghc": "haskell", "pwsh": "powershell",
}

_ALIASES = {alias: spec.name for spec in REGISTRY.values() for alias in spec.aliases}


def spec(language: str) -> LanguageSpec:
    """The registry row of a language.

    Args:
        language: a canonical name or alias (case-insensitive).

    Returns:
        The :class:`LanguageSpec`.

    Raises:
        InputError: unknown language.
    """
    return REGISTRY[canonical_language(language)]


def canonical_language(name: str) -> str:
    """Return the canonical language name for a user-supplied ``--language`` value.

    Args:
        name: a name from :data:`LANGUAGES` or an alias (``"py"``, ``"c++"``, ``"js"``, ``"ts"``,
            ``"c#"``, ``"golang"``...), case-insensitive.

    Returns:
        One of :data:`LANGUAGES`.

    Raises:
        InputError: the name is not a supported language.
    """
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in REGISTRY:
        raise InputError(
            f"unknown language {name!r}", hint=f"choose one of: {', '.join(LANGUAGES)}"
        )
    return key


def language_for(path: str | Path, override: str | None = None) -> str | None:
    """Language of a source file, chosen by its extension unless forced.

    Args:
        path: file path (only its suffix is looked at, case-insensitively).
        override: a language name that wins over the extension (``--language``).

    Returns:
        A name from :data:`LANGUAGES`, or None when the extension is unknown and no override is given.

    Raises:
        InputError: ``override`` is not a supported language name.
    """
    if override is not None:
        return canonical_language(override)
    return EXTENSIONS.get(Path(path).suffix.lower())


_SHEBANG = re.compile(rb"#![ \t]*(\S+)(?:[ \t]+(.*))?")
_VERSION_TAIL = re.compile(r"[\d.]+$")


def shebang_language(first_line: bytes) -> tuple[str | None, str | None]:
    """The language a script's ``#!`` line names.

    ``#!/usr/bin/env python3``, ``#!/usr/bin/env -S node --flag``, ``#!/usr/local/bin/ruby2.7``;
    the interpreter's base name is looked up with and without trailing version digits.

    Args:
        first_line: the first bytes of a file (only the first line is read).

    Returns:
        ``(language, None)`` for a parsed language (:data:`LANGUAGES`), ``(None, name)`` for a
        language twinspect does not parse (:data:`UNPARSED_INTERPRETERS`), ``(None, None)``
        without a recognised shebang.
    """
    m = _SHEBANG.match(first_line.split(b"\n", 1)[0])
    if m is None:
        return None, None
    prog = m.group(1).decode("utf-8", "replace").rsplit("/", 1)[-1]
    if prog == "env":
        args = [a for a in (m.group(2) or b"").decode("utf-8", "replace").split() if not a.startswith("-")
                and "=" not in a]
        if not args:
            return None, None
        prog = args[0].rsplit("/", 1)[-1]
    for name in (prog, _VERSION_TAIL.sub("", prog)):
        if name in INTERPRETERS:
            return INTERPRETERS[name], None
        if name in UNPARSED_INTERPRETERS:
            return None, UNPARSED_INTERPRETERS[name]
    return None, None


@functools.cache
def get_language(language: str) -> tree_sitter.Language:
    """The tree-sitter :class:`~tree_sitter.Language` of a supported language (cached).

    Raises:
        InputError: unknown language name.
    """
    kind, _, name = spec(language).grammar.partition(":")
    if kind == "module":
        return tree_sitter.Language(importlib.import_module(name).language())
    from tree_sitter_language_pack import get_language as pack_language

    return pack_language(name)  # type: ignore[arg-type]


@functools.cache
def get_parser(language: str) -> tree_sitter.Parser:
    """A tree-sitter parser for ``language``, created once per process.

    Parsers are not thread-safe; use one process per worker (the pipeline is single-threaded).

    Args:
        language: a name from :data:`LANGUAGES`.

    Returns:
        A :class:`tree_sitter.Parser` bound to the language's grammar.

    Raises:
        InputError: unknown language name.
    """
    return tree_sitter.Parser(get_language(language))


# Per-language views of the registry, as used by the fragment miner (kept as plain dicts).
FUNCTION_TYPES: dict[str, tuple[str, ...]] = {n: s.function_types for n, s in REGISTRY.items()}
SCOPE_TYPES: dict[str, tuple[str, ...]] = {n: s.scope_types for n, s in REGISTRY.items()}
COMMENT_TYPES: dict[str, tuple[str, ...]] = {n: s.comment_types for n, s in REGISTRY.items()}
#: Separator of qualified names (``Class.method`` / ``A::f``).
NAME_SEPARATOR: dict[str, str] = {n: s.name_separator for n, s in REGISTRY.items()}
#: Keywords kept verbatim in the T2 view, per language.
KEYWORDS: dict[str, frozenset[str]] = {n: s.keywords for n, s in REGISTRY.items()}


@functools.cache
def get_query(language: str) -> tree_sitter.Query:
    """The compiled query capturing ``@function``, ``@scope`` and ``@comment`` nodes (cached).

    One query per language finds every function/method definition, every named scope (class,
    struct...) and every comment in a single C-level pass over the tree.
    """
    s = spec(language)
    patterns = [f"({t}) @function" for t in s.function_types]
    patterns += [f"({t}) @scope" for t in s.scope_types]
    patterns += [f"({t}) @comment" for t in s.comment_types]
    return tree_sitter.Query(get_language(s.name), "\n".join(patterns))


@functools.cache
def get_error_query(language: str) -> tree_sitter.Query:
    """Compiled query capturing every ``ERROR`` node as ``@error`` (cached)."""
    return tree_sitter.Query(get_language(canonical_language(language)), "(ERROR) @error")
