//! Parsers for the agent's and the sim's flags, usable as clap
//! `value_parser`s: `--server A,B,C`, `--label k=v`, `--taint k=v:Effect`.

use drover_api::validation::{is_qualified_name, is_valid_label_value};
use drover_api::{Quantity, Taint};
use std::collections::BTreeMap;

/// A flag value that is not valid; the message names the flag and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

/// `--server ADDR[,ADDR…]`: `host:port` or `http://host:port`, comma
/// separated (the flag may also be repeated; join the values). Returns the
/// addresses as given, without scheme.
pub fn parse_servers(text: &str) -> Result<Vec<String>, FlagError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        if part.starts_with("https://") {
            return Err(FlagError(format!(
                "--server {part}: drover servers speak plain gRPC (http); use host:port"
            )));
        }
        let addr = part.strip_prefix("http://").unwrap_or(part);
        let addr = addr.trim_end_matches('/');
        let ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok || addr.contains('/') {
            return Err(FlagError(format!(
                "--server {part}: expected host:port, e.g. 10.0.0.1:7600"
            )));
        }
        if !out.iter().any(|a| a == addr) {
            out.push(addr.to_string());
        }
    }
    if out.is_empty() {
        return Err(FlagError(
            "--server: give at least one server address (host:port)".into(),
        ));
    }
    Ok(out)
}

/// `--label k=v`: a label key (a qualified name, e.g.
/// `topology.kubernetes.io/zone`) and a label value (may be empty).
pub fn parse_label(text: &str) -> Result<(String, String), FlagError> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(FlagError(format!("--label {text}: expected key=value")));
    };
    let errors = is_qualified_name(key);
    if !errors.is_empty() {
        return Err(FlagError(format!(
            "--label {text}: key {key:?}: {}",
            errors.join("; ")
        )));
    }
    let errors = is_valid_label_value(value);
    if !errors.is_empty() {
        return Err(FlagError(format!(
            "--label {text}: value {value:?}: {}",
            errors.join("; ")
        )));
    }
    Ok((key.to_string(), value.to_string()))
}

/// `--reserved cpu=500m,memory=1Gi`: what the node keeps for itself, by
/// resource (`cpu`, `memory`, `pods`, `ephemeral-storage`), in Kubernetes
/// quantities.
pub fn parse_reserved(text: &str) -> Result<BTreeMap<String, Quantity>, FlagError> {
    let mut out = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = part.split_once('=') else {
            return Err(FlagError(format!(
                "--reserved {text}: {part:?} is not resource=quantity (e.g. cpu=500m,memory=1Gi)"
            )));
        };
        if !matches!(name, "cpu" | "memory" | "pods" | "ephemeral-storage") {
            return Err(FlagError(format!(
                "--reserved {text}: {name:?} is not one of cpu, memory, pods, ephemeral-storage"
            )));
        }
        let q = Quantity(value.to_string());
        if let Err(e) = q.to_nanos() {
            return Err(FlagError(format!(
                "--reserved {text}: {name}={value}: {e} (e.g. 500m, 2, 1Gi, 512Mi)"
            )));
        }
        if q.to_nanos().is_ok_and(|n| n < 0) {
            return Err(FlagError(format!(
                "--reserved {text}: {name}={value} is negative"
            )));
        }
        if out.insert(name.to_string(), q).is_some() {
            return Err(FlagError(format!("--reserved {text}: {name} given twice")));
        }
    }
    Ok(out)
}

/// `--taint k=v:Effect` or `k:Effect` (kubectl's syntax).
pub fn parse_taint(text: &str) -> Result<Taint, FlagError> {
    text.parse::<Taint>()
        .map_err(|e| FlagError(format!("--taint: {e}")))
}

/// Collects `--label` values; a key given twice with different values is an
/// error.
pub fn labels(pairs: &[(String, String)]) -> Result<BTreeMap<String, String>, FlagError> {
    let mut out = BTreeMap::new();
    for (k, v) in pairs {
        if let Some(old) = out.insert(k.clone(), v.clone()) {
            if old != *v {
                return Err(FlagError(format!(
                    "--label {k}: given twice ({old:?} and {v:?})"
                )));
            }
        }
    }
    Ok(out)
}

/// Checks `--taint` values: one taint per key and effect, as Kubernetes
/// requires.
pub fn taints(list: &[Taint]) -> Result<Vec<Taint>, FlagError> {
    let mut out: Vec<Taint> = Vec::new();
    for t in list {
        if out.iter().any(|o| o.key == t.key && o.effect == t.effect) {
            return Err(FlagError(format!(
                "--taint {t}: a taint with key {:?} and this effect is given twice",
                t.key
            )));
        }
        out.push(t.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::TaintEffect;

    #[test]
    fn reserved_resources_parse_and_bad_ones_say_why() {
        let r = parse_reserved("cpu=500m, memory=1Gi").unwrap();
        assert_eq!(r["cpu"], Quantity("500m".into()));
        assert_eq!(r["memory"], Quantity("1Gi".into()));
        for (bad, says) in [
            ("cpu", "is not resource=quantity"),
            ("gpu=1", "is not one of cpu, memory"),
            ("memory=lots", "memory=lots"),
            ("cpu=-1", "is negative"),
            ("cpu=1,cpu=2", "cpu given twice"),
        ] {
            let e = parse_reserved(bad).unwrap_err().0;
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn servers() {
        assert_eq!(
            parse_servers("a:7600, http://10.0.0.2:7600/ ,,a:7600").unwrap(),
            vec!["a:7600".to_string(), "10.0.0.2:7600".to_string()]
        );
        assert_eq!(parse_servers("[::1]:7600").unwrap(), vec!["[::1]:7600"]);
        assert!(parse_servers("").is_err());
        assert!(parse_servers("host").is_err());
        assert!(parse_servers("host:http").is_err());
        assert!(parse_servers("https://a:1").is_err());
        assert!(parse_servers("a:1/x").is_err());
    }

    #[test]
    fn labels_and_taints() {
        assert_eq!(
            parse_label("topology.kubernetes.io/zone=eu-1").unwrap(),
            ("topology.kubernetes.io/zone".into(), "eu-1".into())
        );
        assert_eq!(parse_label("edge=").unwrap(), ("edge".into(), "".into()));
        assert!(parse_label("novalue").is_err());
        assert!(parse_label("bad key=x").is_err());
        let e = parse_label("k=has space").unwrap_err();
        assert!(e.0.contains("value"), "{e}");
        let t = parse_taint("dedicated=edge:NoSchedule").unwrap();
        assert_eq!(t.key, "dedicated");
        assert_eq!(t.value, "edge");
        assert_eq!(t.effect, Some(TaintEffect::NoSchedule));
        assert_eq!(parse_taint("gpu:NoExecute").unwrap().value, "");
        assert!(parse_taint("gpu=yes:Sometimes").is_err());
        assert!(parse_taint("gpu=yes").is_err());
        let l = labels(&[("a".into(), "1".into()), ("a".into(), "1".into())]).unwrap();
        assert_eq!(l.len(), 1);
        assert!(labels(&[("a".into(), "1".into()), ("a".into(), "2".into())]).is_err());
        let t1 = parse_taint("k=v:NoSchedule").unwrap();
        let t2 = parse_taint("k=w:NoSchedule").unwrap();
        let t3 = parse_taint("k=w:NoExecute").unwrap();
        assert!(taints(&[t1.clone(), t3]).is_ok());
        assert!(taints(&[t1, t2]).is_err());
    }
}
