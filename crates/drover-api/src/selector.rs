//! Label selectors: matching, and kubectl's `-l` string syntax.
//!
//! A [`Selector`] is a list of [`Requirement`]s that must all hold. It comes
//! from a resource's [`LabelSelector`] (`matchLabels` + `matchExpressions`,
//! see [`Selector::from_label_selector`]) or from a string
//! ([`Selector::parse`]):
//!
//! ```text
//! a=b, a==b     the label a is b
//! c!=d          c is absent or not d
//! e in (x,y)    e is x or y
//! f notin (z)   f is absent or not z
//! g             g exists
//! !h            h does not exist
//! n>5, n<10     n is an integer greater (less) than the value
//! ```
//!
//! The empty selector matches everything. [`Selector`]'s `Display` writes
//! the canonical string form (requirements sorted, values sorted), which
//! [`Selector::parse`] reads back to the same selector.
//!
//! ```
//! use drover_api::selector::Selector;
//! use std::collections::BTreeMap;
//!
//! let selector = Selector::parse("app=agent, tier notin (test), !legacy").unwrap();
//! let labels = BTreeMap::from([("app".to_string(), "agent".to_string())]);
//! assert!(selector.matches(&labels));
//! assert_eq!(selector.to_string(), "app=agent,!legacy,tier notin (test)");
//! ```

use std::collections::BTreeSet;
use std::fmt;

use crate::meta::{LabelSelector, LabelSelectorOperator, Labels};
use crate::validation::names::{is_qualified_name, is_valid_label_value};

/// Why a selector is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// Operator of a [`Requirement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// `key=value` (also written `==`): the label is the value.
    Equals,
    /// `key!=value`: the label is absent or another value.
    NotEquals,
    /// `key in (a,b)`: the label is one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or none of the values.
    NotIn,
    /// `key`: the label exists.
    Exists,
    /// `!key`: the label does not exist.
    DoesNotExist,
    /// `key>5`: the label is an integer greater than the value.
    GreaterThan,
    /// `key<5`: the label is an integer less than the value.
    LessThan,
}

/// One requirement on a label. Built only through [`Requirement::new`], so
/// it is always well formed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    /// A requirement, checked as Kubernetes' `NewRequirement` does: a valid
    /// label key; one value for `=`/`!=`; at least one for `in`/`notin`;
    /// none for the existence operators; one integer for `>`/`<`; valid
    /// label values.
    pub fn new<I, S>(key: &str, operator: Operator, values: I) -> Result<Self, SelectorError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let values: BTreeSet<String> = values.into_iter().map(Into::into).collect();
        let errors = is_qualified_name(key);
        if !errors.is_empty() {
            return Err(SelectorError(format!(
                "invalid label key {key:?}: {}",
                errors.join("; ")
            )));
        }
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(SelectorError(format!(
                    "for 'in', 'notin' operators, values set can't be empty (key {key:?})"
                )));
            }
            Operator::Equals | Operator::NotEquals if values.len() != 1 => {
                return Err(SelectorError(format!(
                    "exact-match compatibility requires one single value (key {key:?})"
                )));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(SelectorError(format!(
                    "values set must be empty for exists and does not exist (key {key:?})"
                )));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    return Err(SelectorError(format!(
                        "for 'Gt', 'Lt' operators, exactly one value is required (key {key:?})"
                    )));
                }
                if let Some(value) = values.iter().find(|v| v.parse::<i64>().is_err()) {
                    return Err(SelectorError(format!(
                        "for 'Gt', 'Lt' operators, the value must be an integer, not {value:?} (key {key:?})"
                    )));
                }
            }
            _ => {}
        }
        for value in &values {
            let errors = is_valid_label_value(value);
            if !errors.is_empty() {
                return Err(SelectorError(format!(
                    "invalid label value {value:?} for key {key:?}: {}",
                    errors.join("; ")
                )));
            }
        }
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted.
    pub fn values(&self) -> &BTreeSet<String> {
        &self.values
    }

    /// Whether the labels satisfy this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => {
                !value.is_some_and(|v| self.values.contains(v))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(label), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values
                        .iter()
                        .next()
                        .and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    label > bound
                } else {
                    label < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = || self.values.iter().cloned().collect::<Vec<_>>().join(",");
        match self.operator {
            Operator::Exists => f.write_str(&self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={}", self.key, joined()),
            Operator::NotEquals => write!(f, "{}!={}", self.key, joined()),
            Operator::In => write!(f, "{} in ({})", self.key, joined()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, joined()),
            Operator::GreaterThan => write!(f, "{}>{}", self.key, joined()),
            Operator::LessThan => write!(f, "{}<{}", self.key, joined()),
        }
    }
}

/// Requirements that must all hold. The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Selector::default()
    }

    /// A selector from requirements (kept in canonical order).
    pub fn new(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements.into_iter().collect();
        requirements.sort();
        Selector { requirements }
    }

    /// `key=value` for every label, e.g. from a pod's `nodeSelector`.
    pub fn from_labels(labels: &Labels) -> Result<Self, SelectorError> {
        labels
            .iter()
            .map(|(k, v)| Requirement::new(k, Operator::Equals, [v.as_str()]))
            .collect::<Result<Vec<_>, _>>()
            .map(Selector::new)
    }

    /// The selector of a resource's [`LabelSelector`], as Kubernetes'
    /// `LabelSelectorAsSelector` builds it (an empty one matches
    /// everything).
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in &selector.match_labels {
            requirements.push(Requirement::new(key, Operator::Equals, [value.as_str()])?);
        }
        for expression in &selector.match_expressions {
            let operator = match &expression.operator {
                Some(LabelSelectorOperator::In) => Operator::In,
                Some(LabelSelectorOperator::NotIn) => Operator::NotIn,
                Some(LabelSelectorOperator::Exists) => Operator::Exists,
                Some(LabelSelectorOperator::DoesNotExist) => Operator::DoesNotExist,
                Some(LabelSelectorOperator::Other(other)) => {
                    return Err(SelectorError(format!(
                        "{other:?} is not a valid label selector operator"
                    )))
                }
                None => {
                    return Err(SelectorError(format!(
                        "operator missing for key {:?}",
                        expression.key
                    )))
                }
            };
            requirements.push(Requirement::new(
                &expression.key,
                operator,
                expression.values.iter().map(String::as_str),
            )?);
        }
        Ok(Selector::new(requirements))
    }

    /// Parses kubectl's `-l` syntax (see the module documentation).
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        Parser::new(text)
            .parse()
            .map_err(|reason| SelectorError(format!("unable to parse selector {text:?}: {reason}")))
    }

    /// The requirements, in canonical order.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Selector::parse(text)
    }
}

impl LabelSelector {
    /// Whether the labels match this selector. A selector that is not valid
    /// (see [`Selector::from_label_selector`]) matches nothing.
    pub fn matches(&self, labels: &Labels) -> bool {
        Selector::from_label_selector(self).is_ok_and(|s| s.matches(labels))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Identifier(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    OpenParen,
    CloseParen,
    Comma,
    End,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Identifier(text) => write!(f, "{text:?}"),
            Token::Not => f.write_str("'!'"),
            Token::Equals => f.write_str("'='"),
            Token::DoubleEquals => f.write_str("'=='"),
            Token::NotEquals => f.write_str("'!='"),
            Token::Greater => f.write_str("'>'"),
            Token::Less => f.write_str("'<'"),
            Token::OpenParen => f.write_str("'('"),
            Token::CloseParen => f.write_str("')'"),
            Token::Comma => f.write_str("','"),
            Token::End => f.write_str("end of string"),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if is_special(c) {
            chars.next();
            let token = match c {
                '=' if chars.peek() == Some(&'=') => {
                    chars.next();
                    Token::DoubleEquals
                }
                '=' => Token::Equals,
                '!' if chars.peek() == Some(&'=') => {
                    chars.next();
                    Token::NotEquals
                }
                '!' => Token::Not,
                '(' => Token::OpenParen,
                ')' => Token::CloseParen,
                ',' => Token::Comma,
                '>' => Token::Greater,
                _ => Token::Less,
            };
            tokens.push(token);
            continue;
        }
        let mut identifier = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || is_special(c) {
                break;
            }
            identifier.push(c);
            chars.next();
        }
        tokens.push(Token::Identifier(identifier));
    }
    tokens.push(Token::End);
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
}

impl Parser {
    fn new(text: &str) -> Self {
        Parser {
            tokens: tokenize(text),
            position: 0,
        }
    }

    fn peek(&self) -> &Token {
        self.tokens.get(self.position).unwrap_or(&Token::End)
    }

    /// The current token, moving past it (at the end, `End` again and
    /// again: `peek` reads `End` past the last token).
    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.position += 1;
        token
    }

    fn parse(mut self) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        if *self.peek() == Token::End {
            return Ok(Selector::everything());
        }
        loop {
            requirements.push(self.requirement()?);
            match self.next() {
                Token::End => return Ok(Selector::new(requirements)),
                Token::Comma => {}
                other => return Err(format!("found {other}, expected: ',' or end of string")),
            }
        }
    }

    fn key(&mut self) -> Result<String, String> {
        match self.next() {
            Token::Identifier(key) => Ok(key),
            other => Err(format!("found {other}, expected: a label key")),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        if *self.peek() == Token::Not {
            self.next();
            let key = self.key()?;
            return Requirement::new(&key, Operator::DoesNotExist, Vec::<String>::new())
                .map_err(|e| e.0);
        }
        let key = self.key()?;
        let (operator, values) = match self.peek().clone() {
            Token::Comma | Token::End => (Operator::Exists, Vec::new()),
            Token::Equals | Token::DoubleEquals => {
                self.next();
                (Operator::Equals, vec![self.exact_value()?])
            }
            Token::NotEquals => {
                self.next();
                (Operator::NotEquals, vec![self.exact_value()?])
            }
            Token::Greater => {
                self.next();
                (Operator::GreaterThan, vec![self.exact_value()?])
            }
            Token::Less => {
                self.next();
                (Operator::LessThan, vec![self.exact_value()?])
            }
            Token::Identifier(word) if word == "in" || word == "notin" => {
                self.next();
                let operator = if word == "in" {
                    Operator::In
                } else {
                    Operator::NotIn
                };
                (operator, self.value_list()?)
            }
            other => {
                return Err(format!(
                    "found {other} after key {key:?}, expected: '=', '!=', '==', 'in', 'notin', '>', '<', ',' or end of string"
                ))
            }
        };
        Requirement::new(&key, operator, values).map_err(|e| e.0)
    }

    /// The value after `=`, `!=`, `>`, `<`: an identifier, or nothing
    /// (`a=` means the empty value).
    fn exact_value(&mut self) -> Result<String, String> {
        match self.peek().clone() {
            Token::Identifier(value) => {
                self.next();
                Ok(value)
            }
            Token::Comma | Token::End => Ok(String::new()),
            other => Err(format!("found {other}, expected: a value")),
        }
    }

    /// `( value, value, … )`; an empty slot is the empty value, as in
    /// Kubernetes (`in ()` means the value "").
    fn value_list(&mut self) -> Result<Vec<String>, String> {
        match self.next() {
            Token::OpenParen => {}
            other => return Err(format!("found {other}, expected: '('")),
        }
        let mut values = Vec::new();
        let mut current = String::new();
        loop {
            match self.next() {
                Token::Identifier(value) if current.is_empty() => current = value,
                Token::Comma => values.push(std::mem::take(&mut current)),
                Token::CloseParen => {
                    values.push(current);
                    return Ok(values);
                }
                other => return Err(format!("found {other}, expected: a value, ',' or ')'")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::LabelSelectorRequirement;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_parsed_selector_lists_its_requirements_sorted_by_key() {
        let s = Selector::parse("tier in (b,a),app=web,!legacy").unwrap();
        let parts: Vec<(&str, Operator, Vec<&str>)> = s
            .requirements()
            .iter()
            .map(|r| {
                (
                    r.key(),
                    r.operator(),
                    r.values().iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            parts,
            [
                ("app", Operator::Equals, vec!["web"]),
                ("legacy", Operator::DoesNotExist, vec![]),
                ("tier", Operator::In, vec!["a", "b"]),
            ]
        );
        let r =
            Requirement::new("example.com/zone", Operator::Exists, Vec::<String>::new()).unwrap();
        assert_eq!(r.key(), "example.com/zone");
    }

    #[test]
    fn parses_every_operator() {
        let s = Selector::parse("a=b,c!=d,e in (x,y),f notin (z),g,!h,n>5,m<3,k==v").unwrap();
        let l = labels(&[
            ("a", "b"),
            ("c", "x"),
            ("e", "y"),
            ("g", ""),
            ("n", "6"),
            ("m", "2"),
            ("k", "v"),
        ]);
        assert!(s.matches(&l));
        assert_eq!(
            s.to_string(),
            "a=b,c!=d,e in (x,y),f notin (z),g,!h,k=v,m<3,n>5"
        );
        for (key, value) in [
            ("a", "c"),
            ("c", "d"),
            ("e", "q"),
            ("f", "z"),
            ("h", "1"),
            ("n", "5"),
            ("m", "3"),
        ] {
            let mut l2 = l.clone();
            l2.insert(key.to_string(), value.to_string());
            assert!(!s.matches(&l2), "{key}={value} should not match");
        }
        let mut without_g = l.clone();
        without_g.remove("g");
        assert!(!s.matches(&without_g));
    }

    #[test]
    fn whitespace_and_empty_values() {
        let s = Selector::parse("  a = , b in ( x , ) ").unwrap();
        assert_eq!(s.to_string(), "a=,b in (,x)");
        assert!(s.matches(&labels(&[("a", ""), ("b", "")])));
        assert_eq!(
            Selector::parse("a in ()").unwrap().requirements()[0].values(),
            &BTreeSet::from([String::new()])
        );
        assert!(Selector::parse("").unwrap().is_empty());
        assert!(Selector::parse("   ").unwrap().matches(&Labels::new()));
    }

    #[test]
    fn reports_syntax_errors() {
        for bad in [
            "a=b,",
            ",a",
            "a b",
            "a in x",
            "a in (x",
            "a in (x y)",
            "!a=b",
            "a>x",
            "a==",
            "=b",
            "a=(b)",
            "Bad_Key_/x=y",
            "a=b c",
            "a=not a valid value",
        ] {
            if bad == "a==" {
                // `a==` is the empty value, as with `a=`.
                assert!(Selector::parse(bad).is_ok());
                continue;
            }
            assert!(Selector::parse(bad).is_err(), "{bad:?} should not parse");
        }
        let err = Selector::parse("a in (x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unable to parse selector \"a in (x\": found end of string, expected: a value, ',' or ')'"
        );
    }

    #[test]
    fn keywords_may_be_keys_and_values() {
        let s = Selector::parse("in=notin,notin in (in)").unwrap();
        assert!(s.matches(&labels(&[("in", "notin"), ("notin", "in")])));
    }

    #[test]
    fn label_selector_conversion() {
        let ls = LabelSelector {
            match_labels: labels(&[("app", "x")]),
            match_expressions: vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: Some(LabelSelectorOperator::NotIn),
                values: vec!["test".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = Selector::from_label_selector(&ls).unwrap();
        assert_eq!(s.to_string(), "app=x,tier notin (test)");
        assert!(ls.matches(&labels(&[("app", "x")])));
        assert!(!ls.matches(&labels(&[("app", "x"), ("tier", "test")])));
        assert!(LabelSelector::default().matches(&Labels::new()));

        let bad = LabelSelector {
            match_expressions: vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: Some(LabelSelectorOperator::Other("Gt".into())),
                values: vec!["1".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            Selector::from_label_selector(&bad).unwrap_err().to_string(),
            "\"Gt\" is not a valid label selector operator"
        );
        assert!(!bad.matches(&Labels::new()));
    }

    #[test]
    fn requirement_rules() {
        assert!(Requirement::new("a", Operator::In, Vec::<String>::new()).is_err());
        assert!(Requirement::new("a", Operator::Equals, ["x", "y"]).is_err());
        assert!(Requirement::new("a", Operator::Exists, ["x"]).is_err());
        assert!(Requirement::new("a", Operator::GreaterThan, ["x"]).is_err());
        assert!(Requirement::new("a", Operator::GreaterThan, ["3"]).is_ok());
        // As in Kubernetes, values must be label values too: no negative bounds.
        assert!(Requirement::new("a", Operator::GreaterThan, ["-3"]).is_err());
        assert!(Requirement::new("", Operator::Exists, Vec::<String>::new()).is_err());
    }

    fn key_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z][a-z0-9]{0,6}",
            "[a-z]{1,5}\\.[a-z]{2,3}/[A-Za-z][-A-Za-z0-9_.]{0,5}[A-Za-z0-9]",
        ]
    }

    fn value_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            "",
            "[A-Za-z0-9]",
            "[A-Za-z0-9][-A-Za-z0-9_.]{0,6}[A-Za-z0-9]"
        ]
    }

    fn requirement_strategy() -> impl Strategy<Value = Requirement> {
        (
            key_strategy(),
            0..8usize,
            prop::collection::btree_set(value_strategy(), 1..4),
            0..100_000u32,
        )
            .prop_map(|(key, op, values, number)| {
                let first = values.iter().next().cloned().unwrap_or_default();
                let (operator, values): (Operator, Vec<String>) = match op {
                    0 => (Operator::Equals, vec![first]),
                    1 => (Operator::NotEquals, vec![first]),
                    2 => (Operator::In, values.into_iter().collect()),
                    3 => (Operator::NotIn, values.into_iter().collect()),
                    4 => (Operator::Exists, vec![]),
                    5 => (Operator::DoesNotExist, vec![]),
                    6 => (Operator::GreaterThan, vec![number.to_string()]),
                    _ => (Operator::LessThan, vec![number.to_string()]),
                };
                Requirement::new(&key, operator, values).expect("generated requirement is valid")
            })
    }

    fn labels_strategy() -> impl Strategy<Value = Labels> {
        prop::collection::btree_map(
            prop_oneof!["[a-c]", key_strategy()],
            prop_oneof![value_strategy(), "[0-9]{1,3}"],
            0..5,
        )
    }

    proptest! {
        #[test]
        fn string_form_round_trips(requirements in prop::collection::vec(requirement_strategy(), 0..5)) {
            let selector = Selector::new(requirements);
            let text = selector.to_string();
            let parsed = Selector::parse(&text);
            prop_assert_eq!(parsed.as_ref().ok(), Some(&selector), "text: {}", text);
        }

        #[test]
        fn exists_and_does_not_exist_are_complements(key in key_strategy(), labels in labels_strategy()) {
            let exists = Requirement::new(&key, Operator::Exists, Vec::<String>::new()).unwrap();
            let absent = Requirement::new(&key, Operator::DoesNotExist, Vec::<String>::new()).unwrap();
            prop_assert_ne!(exists.matches(&labels), absent.matches(&labels));
        }

        #[test]
        fn in_and_not_in_are_complements_when_the_key_exists(
            key in "[a-c]",
            values in prop::collection::btree_set(value_strategy(), 1..4),
            mut labels in labels_strategy(),
            value in value_strategy(),
        ) {
            labels.insert(key.clone(), value);
            let is_in = Requirement::new(&key, Operator::In, values.clone()).unwrap();
            let not_in = Requirement::new(&key, Operator::NotIn, values).unwrap();
            prop_assert_ne!(is_in.matches(&labels), not_in.matches(&labels));
        }

        #[test]
        fn not_in_matches_when_the_key_is_absent(
            key in "[a-c]",
            values in prop::collection::btree_set(value_strategy(), 1..4),
            mut labels in labels_strategy(),
        ) {
            labels.remove(&key);
            prop_assert!(Requirement::new(&key, Operator::NotIn, values.clone()).unwrap().matches(&labels));
            prop_assert!(!Requirement::new(&key, Operator::In, values).unwrap().matches(&labels));
        }

        #[test]
        fn a_selector_from_labels_matches_them(labels in labels_strategy()) {
            let selector = Selector::from_labels(&labels).unwrap();
            prop_assert!(selector.matches(&labels));
        }

        #[test]
        fn parsing_arbitrary_text_never_panics(text in "[a-z=!(),<> 0-9]{0,30}") {
            let _ = Selector::parse(&text);
        }
    }
}
