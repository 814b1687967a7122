//! kubectl's JSONPath templates (`-o jsonpath=…`, and the paths of
//! `-o custom-columns`), the subset of client-go's `util/jsonpath` that
//! scripts use: text outside braces is printed as is; inside braces a path
//! (`.a.b`, `$`, `@`, `['key']`, `.*`, `[*]`, `[n]`, `[-1]`, `[a:b]`,
//! `..name`, `[?(@.type=="Ready")]`, `\.` in a key), a quoted string
//! (`{"\n"}`), or `range PATH` … `end`.
//!
//! This is not RFC 9535 JSONPath (which `serde_json_path` and its kin
//! implement): kubectl's are templates, with literal text, `range`/`end`
//! and Go's way of printing results (several joined by a space, strings
//! bare, objects and lists as compact JSON), so they are parsed here.
//! As kubectl does by default (`--allow-missing-template-keys`), a missing
//! key prints nothing.
//!
//! Pure: a template and a JSON value in, text out.

use serde_json::Value;
use thiserror::Error;

/// Why a template cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct ParseError(pub String);

fn fail<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(msg.into()))
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Path(Path),
    Range(Path, Vec<Node>),
}

/// Where a path starts: the root (`$`), or the current element (`@`, or
/// a path starting with `.` or `[`: the root at the top level, the element
/// inside `range`, as in Go's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Root,
    Current,
}

#[derive(Debug, Clone, PartialEq)]
struct Path {
    start: Start,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    /// `.*` or `[*]`.
    Wildcard,
    Index(i64),
    Slice(Option<i64>, Option<i64>),
    /// `..`: this node and every node under it, then the next step.
    Descend,
    Filter(Box<Filter>),
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Path),
    Literal(Value),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    /// None: `[?(@.x)]`, the left side exists.
    op: Option<(Op, Operand)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Template {
    /// Parses a template as kubectl's `-o jsonpath=` takes it.
    pub fn parse(text: &str) -> Result<Template, ParseError> {
        let mut stack: Vec<(Option<Path>, Vec<Node>)> = vec![(None, Vec::new())];
        let mut rest = text;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                push(&mut stack, Node::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                push(&mut stack, Node::Text(rest[..open].to_string()));
            }
            let after = &rest[open + 1..];
            let close = action_end(after).ok_or_else(|| {
                ParseError(format!(
                    "unclosed action: {{{after} (every {{ needs its }})"
                ))
            })?;
            let action = after[..close].trim();
            rest = &after[close + 1..];
            if action == "end" {
                if stack.len() == 1 {
                    return fail("not in range, nothing to end");
                }
                let (path, body) = stack.pop().expect("a range is open");
                let path = path.expect("only ranges are pushed");
                push(&mut stack, Node::Range(path, body));
            } else if let Some(p) = action
                .strip_prefix("range")
                .filter(|p| p.starts_with(|c: char| c.is_whitespace() || c == '.' || c == '['))
            {
                stack.push((Some(parse_path(p.trim())?), Vec::new()));
            } else if action.starts_with('"') || action.starts_with('\'') {
                let (s, tail) = quoted(action)?;
                if !tail.trim().is_empty() {
                    return fail(format!(
                        "unexpected {tail:?} after a quoted string in {{{action}}}"
                    ));
                }
                push(&mut stack, Node::Text(s));
            } else if action.is_empty() {
                continue;
            } else {
                push(&mut stack, Node::Path(parse_path(action)?));
            }
        }
        if stack.len() > 1 {
            return fail("unclosed range: every {range …} needs its {end}");
        }
        let (_, nodes) = stack.pop().expect("the top level");
        Ok(Template { nodes })
    }

    /// The template's paths' results, one list per path at the top level
    /// (`-o jsonpath-as-json`, custom columns).
    pub fn results<'a>(&self, data: &'a Value) -> Vec<Vec<&'a Value>> {
        let mut all = Vec::new();
        collect(&self.nodes, data, data, &mut all);
        all
    }

    /// Executes the template on `data`, as kubectl prints it.
    pub fn render(&self, data: &Value) -> String {
        let mut out = String::new();
        render(&self.nodes, data, data, &mut out);
        out
    }
}

fn push(stack: &mut [(Option<Path>, Vec<Node>)], n: Node) {
    if let Some((_, nodes)) = stack.last_mut() {
        nodes.push(n);
    }
}

/// Where the action that starts `s` ends (its `}`), skipping braces in
/// quoted strings.
fn action_end(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '}' => return Some(i),
                _ => {}
            },
        }
    }
    None
}

/// A quoted string at the start of `s` (Go's escapes: \n \t \r \\ \" \'),
/// and what follows it.
fn quoted(s: &str) -> Result<(String, &str), ParseError> {
    let mut chars = s.char_indices();
    let Some((_, q)) = chars.next() else {
        return fail("expected a quoted string");
    };
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        if c == q {
            return Ok((out, &s[i + c.len_utf8()..]));
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, 'n')) => out.push('\n'),
            Some((_, 't')) => out.push('\t'),
            Some((_, 'r')) => out.push('\r'),
            Some((_, '0')) => out.push('\0'),
            Some((_, e @ ('\\' | '"' | '\''))) => out.push(e),
            Some((_, e)) => return fail(format!("unknown escape sequence \\{e} in {s}")),
            None => break,
        }
    }
    fail(format!("unterminated quoted string: {s}"))
}

/// Parses a path: `$…`, `@…`, or `.…`/`[…]` (from the root).
fn parse_path(s: &str) -> Result<Path, ParseError> {
    let (start, mut rest) = match s.chars().next() {
        Some('$') => (Start::Root, &s[1..]),
        Some('@') => (Start::Current, &s[1..]),
        Some('.') | Some('[') => (Start::Current, s),
        _ => {
            return fail(format!(
                "unrecognized identifier {s} (a path starts with . or [, e.g. {{.metadata.name}})"
            ))
        }
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("..") {
            steps.push(Step::Descend);
            rest = r;
            if !rest.starts_with('[') {
                rest = field(rest, &mut steps)?;
            }
        } else if let Some(r) = rest.strip_prefix('.') {
            rest = field(r, &mut steps)?;
        } else if let Some(r) = rest.strip_prefix('[') {
            rest = bracket(r, &mut steps)?;
        } else {
            return fail(format!("unexpected {rest:?} in the path {s}"));
        }
    }
    Ok(Path { start, steps })
}

/// A field name after `.`, up to the next `.` or `[` (`\.` is a dot of
/// the name).
fn field<'a>(s: &'a str, steps: &mut Vec<Step>) -> Result<&'a str, ParseError> {
    let mut name = String::new();
    let mut end = s.len();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if chars.peek().map(|(_, n)| *n) == Some('.') => {
                chars.next();
                name.push('.');
            }
            '.' | '[' => {
                end = i;
                break;
            }
            c if c.is_whitespace() => {
                return fail(format!("unexpected space in the field name {s:?}"))
            }
            c => name.push(c),
        }
    }
    if name == "*" {
        steps.push(Step::Wildcard);
    } else if !name.is_empty() {
        steps.push(Step::Field(name));
    }
    Ok(&s[end..])
}

/// The inside of `[…]` (after `[`), then what follows `]`.
fn bracket<'a>(s: &'a str, steps: &mut Vec<Step>) -> Result<&'a str, ParseError> {
    if let Some(r) = s.strip_prefix("?(") {
        let close = filter_end(r).ok_or_else(|| ParseError(format!("unclosed filter: [?({r}")))?;
        steps.push(Step::Filter(Box::new(parse_filter(r[..close].trim())?)));
        let tail = r[close + 1..].trim_start();
        return tail
            .strip_prefix(']')
            .ok_or_else(|| ParseError(format!("expected ] after the filter [?({r}")));
    }
    if s.starts_with('\'') || s.starts_with('"') {
        let (name, tail) = quoted(s)?;
        steps.push(Step::Field(name));
        return tail
            .strip_prefix(']')
            .ok_or_else(|| ParseError(format!("expected ] after ['…'] in [{s}")));
    }
    let close = s
        .find(']')
        .ok_or_else(|| ParseError(format!("unterminated array: [{s}")))?;
    let inner = s[..close].trim();
    let num = |t: &str| -> Result<Option<i64>, ParseError> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse()
            .map(Some)
            .map_err(|_| ParseError(format!("invalid array index {t:?} in [{inner}]")))
    };
    if inner == "*" {
        steps.push(Step::Wildcard);
    } else if let Some((a, b)) = inner.split_once(':') {
        // [a:b] and [a:b:step]: the step is not supported.
        if b.contains(':') {
            return fail(format!("[{inner}]: a slice's step is not supported"));
        }
        steps.push(Step::Slice(num(a)?, num(b)?));
    } else {
        match num(inner)? {
            Some(i) => steps.push(Step::Index(i)),
            None => return fail("empty array index []"),
        }
    }
    Ok(&s[close + 1..])
}

/// Where a filter's `(` closes, skipping quoted strings.
fn filter_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth == 0 => return Some(i),
            (None, ')') => depth -= 1,
            _ => {}
        }
    }
    None
}

fn parse_filter(s: &str) -> Result<Filter, ParseError> {
    const OPS: [(&str, Op); 6] = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    // The first operator outside quotes.
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                continue;
            }
            (Some(_), _) => continue,
            (None, '"' | '\'') => {
                quote = Some(c);
                continue;
            }
            _ => {}
        }
        if let Some((tok, op)) = OPS.iter().find(|(t, _)| s[i..].starts_with(t)) {
            let left = operand(s[..i].trim())?;
            let right = operand(s[i + tok.len()..].trim())?;
            return Ok(Filter {
                left,
                op: Some((*op, right)),
            });
        }
    }
    Ok(Filter {
        left: operand(s)?,
        op: None,
    })
}

fn operand(s: &str) -> Result<Operand, ParseError> {
    if s.starts_with('@') || s.starts_with('$') || s.starts_with('.') {
        return Ok(Operand::Path(parse_path(s)?));
    }
    if s.starts_with('"') || s.starts_with('\'') {
        let (v, tail) = quoted(s)?;
        if !tail.trim().is_empty() {
            return fail(format!("unexpected {tail:?} in the filter"));
        }
        return Ok(Operand::Literal(Value::String(v)));
    }
    match serde_json::from_str::<Value>(s) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => Ok(Operand::Literal(v)),
        _ => fail(format!(
            "unrecognized filter operand {s:?} (a path @.x, a quoted string or a number)"
        )),
    }
}

fn eval<'a>(p: &Path, root: &'a Value, current: &'a Value) -> Vec<&'a Value> {
    let mut cur = vec![match p.start {
        Start::Root => root,
        Start::Current => current,
    }];
    for step in &p.steps {
        let mut next = Vec::new();
        for v in cur {
            apply(step, v, root, &mut next);
        }
        cur = next;
    }
    cur
}

fn apply<'a>(step: &Step, v: &'a Value, root: &'a Value, next: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => {
            if let Some(x) = v.get(name.as_str()) {
                next.push(x);
            }
        }
        Step::Wildcard => match v {
            Value::Array(a) => next.extend(a.iter()),
            Value::Object(o) => next.extend(o.values()),
            _ => {}
        },
        Step::Index(i) => {
            if let Value::Array(a) = v {
                let len = a.len() as i64;
                let i = if *i < 0 { len + i } else { *i };
                if let Some(x) = usize::try_from(i).ok().and_then(|i| a.get(i)) {
                    next.push(x);
                }
            }
        }
        Step::Slice(from, to) => {
            if let Value::Array(a) = v {
                let len = a.len() as i64;
                let norm = |x: i64| if x < 0 { (len + x).max(0) } else { x.min(len) };
                let from = norm(from.unwrap_or(0));
                let to = norm(to.unwrap_or(len));
                if from < to {
                    next.extend(&a[from as usize..to as usize]);
                }
            }
        }
        Step::Descend => descend(v, next),
        Step::Filter(f) => {
            let items: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            next.extend(items.into_iter().filter(|x| holds(f, root, x)));
        }
    }
}

fn descend<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(v);
    match v {
        Value::Array(a) => a.iter().for_each(|x| descend(x, out)),
        Value::Object(o) => o.values().for_each(|x| descend(x, out)),
        _ => {}
    }
}

fn operand_values<'a>(o: &'a Operand, root: &'a Value, cur: &'a Value) -> Vec<&'a Value> {
    match o {
        Operand::Path(p) => eval(p, root, cur),
        Operand::Literal(v) => vec![v],
    }
}

fn holds(f: &Filter, root: &Value, cur: &Value) -> bool {
    let left = operand_values(&f.left, root, cur);
    let Some((op, right)) = &f.op else {
        return !left.is_empty();
    };
    let right = operand_values(right, root, cur);
    let (Some(l), Some(r)) = (left.first(), right.first()) else {
        return false;
    };
    let ord = match (l, r) {
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (a, b) => (a == b).then_some(std::cmp::Ordering::Equal),
    };
    use std::cmp::Ordering::*;
    match op {
        Op::Eq => ord == Some(Equal),
        Op::Ne => ord != Some(Equal),
        Op::Lt => ord == Some(Less),
        Op::Le => matches!(ord, Some(Less | Equal)),
        Op::Gt => ord == Some(Greater),
        Op::Ge => matches!(ord, Some(Greater | Equal)),
    }
}

/// One result as Go's jsonpath prints it: strings bare, objects and lists
/// as compact JSON, other values as their JSON text.
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render(nodes: &[Node], root: &Value, cur: &Value, out: &mut String) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Path(p) => {
                let vals = eval(p, root, cur);
                let texts: Vec<String> = vals.into_iter().map(text).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(p, body) => {
                for item in eval(p, root, cur) {
                    render(body, root, item, out);
                }
            }
        }
    }
}

fn collect<'a>(nodes: &[Node], root: &'a Value, cur: &'a Value, all: &mut Vec<Vec<&'a Value>>) {
    for n in nodes {
        match n {
            Node::Text(_) => {}
            Node::Path(p) => all.push(eval(p, root, cur)),
            Node::Range(p, body) => {
                for item in eval(p, root, cur) {
                    collect(body, root, item, all);
                }
            }
        }
    }
}

/// A custom column's path as kubectl relaxes it: `.a.b`, `a.b` and
/// `{.a.b}` are the same.
pub fn relaxed(path: &str) -> Result<Template, ParseError> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    if p.is_empty() {
        return fail("an empty path");
    }
    let p = if p.starts_with('.') || p.starts_with('[') || p.starts_with('$') {
        p.to_string()
    } else {
        format!(".{p}")
    };
    Template::parse(&format!("{{{p}}}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"metadata": {"name": "a", "labels": {"app": "web"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "now"}},
                 "spec": {"nodeName": "n1", "containers": [{"name": "c1", "image": "busybox"}, {"name": "c2", "image": "nginx"}]},
                 "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}], "restarts": 2}},
                {"metadata": {"name": "b"},
                 "spec": {"nodeName": "n2", "containers": [{"name": "c1", "image": "redis"}]},
                 "status": {"conditions": [{"type": "Ready", "status": "False"}], "restarts": 0}}
            ]
        })
    }

    fn run(t: &str, v: &Value) -> String {
        Template::parse(t)
            .unwrap_or_else(|e| panic!("{t}: {e}"))
            .render(v)
    }

    #[test]
    fn fields_and_wildcards_join_results_with_a_space() {
        let v = list();
        assert_eq!(run("{.items[*].metadata.name}", &v), "a b");
        assert_eq!(run("{.items[0].spec.nodeName}", &v), "n1");
        assert_eq!(run("{.items[-1].metadata.name}", &v), "b");
        assert_eq!(run("{$.kind}", &v), "List");
        assert_eq!(
            run("{.items[*].spec.containers[*].image}", &v),
            "busybox nginx redis"
        );
        assert_eq!(run("{.items[0:1].metadata.name}", &v), "a");
        assert_eq!(run("{.items[1:].metadata.name}", &v), "b");
        assert_eq!(run("{.items[0].metadata['labels']['app']}", &v), "web");
        assert_eq!(run("{.items[0].metadata.labels.*}", &v), "web");
        assert_eq!(run("{..image}", &v), "busybox nginx redis");
        assert_eq!(
            run(
                r"{.items[0].metadata.annotations.kubectl\.kubernetes\.io/restartedAt}",
                &v
            ),
            "now"
        );
    }

    #[test]
    fn text_outside_braces_and_quoted_strings_are_printed() {
        let v = list();
        assert_eq!(run("names: {.items[*].metadata.name}!", &v), "names: a b!");
        assert_eq!(run(r#"{.kind}{"\n"}"#, &v), "List\n");
        assert_eq!(run(r#"{.kind}{'\t'}{"}"}"#, &v), "List\t}");
    }

    #[test]
    fn range_iterates_with_paths_relative_to_the_element() {
        let v = list();
        let t = r#"{range .items[*]}{.metadata.name}{"\t"}{.spec.nodeName}{"\n"}{end}"#;
        assert_eq!(run(t, &v), "a\tn1\nb\tn2\n");
        let nested =
            r#"{range .items[*]}{.metadata.name}:{range .spec.containers[*]} {.name}{end};{end}"#;
        assert_eq!(run(nested, &v), "a: c1 c2;b: c1;");
        assert_eq!(
            run("{range .items[*]}[{@.metadata.name}]{end}", &v),
            "[a][b]"
        );
        assert_eq!(run("{range .items[*]}{$.kind}{end}", &v), "ListList");
        assert_eq!(run("{range.items[*]}{.metadata.name}{end}", &v), "ab");
    }

    #[test]
    fn filters_select_elements() {
        let v = list();
        assert_eq!(
            run(
                r#"{.items[*].status.conditions[?(@.type=="Ready")].status}"#,
                &v
            ),
            "True False"
        );
        assert_eq!(
            run(r#"{.items[?(@.spec.nodeName!='n1')].metadata.name}"#, &v),
            "b"
        );
        assert_eq!(
            run("{.items[?(@.status.restarts>1)].metadata.name}", &v),
            "a"
        );
        assert_eq!(run("{.items[?(@.metadata.labels)].metadata.name}", &v), "a");
    }

    #[test]
    fn objects_and_lists_print_as_compact_json_and_missing_keys_print_nothing() {
        let v = list();
        assert_eq!(run("{.items[0].metadata.labels}", &v), r#"{"app":"web"}"#);
        assert_eq!(run("{.items[0].status.restarts}", &v), "2");
        assert_eq!(run("{.items[0].nothing.here}", &v), "");
        assert_eq!(run("{.items[7].metadata.name}", &v), "");
        assert_eq!(run("x{.missing}y", &v), "xy");
    }

    #[test]
    fn bad_templates_are_refused() {
        for t in [
            "{.items[*]",
            "{range .items[*]}{.a}",
            "{end}",
            "{items}",
            "{.a[x]}",
            r#"{"unterminated}"#,
            "{.a[?(@.b==)]}",
        ] {
            assert!(Template::parse(t).is_err(), "{t} should be refused");
        }
    }

    #[test]
    fn relaxed_paths_of_custom_columns() {
        let v = list();
        for p in [".kind", "kind", "{.kind}", "{kind}"] {
            assert_eq!(relaxed(p).unwrap().render(&v), "List", "{p}");
        }
        let t = relaxed(".items[*].metadata.name").unwrap();
        let r = t.results(&v);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0], vec![&json!("a"), &json!("b")]);
        assert!(relaxed("").is_err());
    }
}
