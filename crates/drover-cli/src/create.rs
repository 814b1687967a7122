//! `drover create configmap|secret generic NAME --from-literal=k=v
//! --from-file=[key=]path`, as kubectl builds them: a file's key is its
//! name (or the given key), a directory gives one key per regular file
//! whose name is a valid key; a ConfigMap keeps UTF-8 values in `data` and
//! others in `binaryData`; a Secret's values are base64 in `data`. The
//! object is created through apply after checking that it does not exist
//! (`AlreadyExists` as kubectl says it); `--dry-run=client -o yaml` prints
//! it without writing.

use crate::client::Client;
use crate::errors::kube;
use crate::kubectl::DryRun;
use crate::printers::{self, Output};
use anyhow::{bail, Context, Result};
use drover_api::validation::config::{encode_base64, is_config_key};
use drover_api::{ConfigMap, Manifest, Secret};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// What `drover create` makes.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CreateCmd {
    /// A ConfigMap from literals and files.
    #[command(visible_alias = "cm")]
    Configmap(Sources),
    /// A Secret (generic: `Opaque` unless --type says otherwise).
    Secret {
        #[command(subcommand)]
        kind: SecretKind,
    },
}

/// The kinds of Secret `create secret` makes.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SecretKind {
    /// A Secret from literals and files.
    Generic {
        #[command(flatten)]
        sources: Sources,
        /// The Secret's type (default Opaque).
        #[arg(long = "type")]
        secret_type: Option<String>,
    },
}

/// The name, the values and where the object goes.
#[derive(Debug, Clone, clap::Args)]
pub struct Sources {
    /// The object's name.
    pub name: String,
    /// A key and its value, `key=value`; repeatable.
    #[arg(long = "from-literal", value_name = "KEY=VALUE")]
    pub from_literal: Vec<String>,
    /// A file (its name is the key, or `key=path`) or a directory (one key
    /// per file); repeatable.
    #[arg(long = "from-file", value_name = "[KEY=]PATH")]
    pub from_file: Vec<String>,
    /// The namespace (default: default).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Show the object, write nothing (`client`: built here; `server`:
    /// validated by the server).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: Option<DryRun>,
    /// Print the object (yaml, json or name) instead of `configmap/NAME created`.
    #[arg(short, long, value_parser = Output::parse)]
    pub output: Option<Output>,
}

fn check_key(key: &str, what: &str) -> Result<()> {
    if let Some(problem) = is_config_key(key).first() {
        bail!("{what}: {key:?} is not a valid key name: {problem}");
    }
    Ok(())
}

/// The keys and raw values of `--from-literal` and `--from-file`, in
/// order; a key given twice is an error.
pub fn values(s: &Sources, kind: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut add = |key: String, value: Vec<u8>| -> Result<()> {
        if out.insert(key.clone(), value).is_some() {
            bail!(
                "cannot add key {key:?}, another key by that name already exists in data for {kind} {:?}",
                s.name
            );
        }
        Ok(())
    };
    for lit in &s.from_literal {
        let Some((k, v)) = lit.split_once('=') else {
            bail!("--from-literal={lit}: expected key=value");
        };
        check_key(k, &format!("--from-literal={lit}"))?;
        add(k.to_string(), v.as_bytes().to_vec())?;
    }
    for spec in &s.from_file {
        let (key, path) = match spec.split_once('=') {
            Some((k, p)) => (Some(k.to_string()), p),
            None => (None, spec.as_str()),
        };
        let p = Path::new(path);
        let meta = std::fs::metadata(p).with_context(|| format!("--from-file={spec}: {path}"))?;
        if meta.is_dir() {
            if key.is_some() {
                bail!(
                    "--from-file={spec}: a key cannot name a directory; give the directory alone"
                );
            }
            let mut entries: Vec<_> = std::fs::read_dir(p)
                .with_context(|| format!("--from-file={spec}: cannot read {path}"))?
                .flatten()
                .collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let name = e.file_name().to_string_lossy().into_owned();
                if !e.path().is_file() || !is_config_key(&name).is_empty() {
                    continue;
                }
                let data = std::fs::read(e.path()).with_context(|| {
                    format!("--from-file={spec}: cannot read {}", e.path().display())
                })?;
                add(name, data)?;
            }
        } else {
            let key = match key {
                Some(k) => k,
                None => p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            check_key(&key, &format!("--from-file={spec}"))?;
            let data = std::fs::read(p)
                .with_context(|| format!("--from-file={spec}: cannot read {path}"))?;
            add(key, data)?;
        }
    }
    Ok(out)
}

/// The object `drover create` makes.
pub fn build(cmd: &CreateCmd) -> Result<Manifest> {
    match cmd {
        CreateCmd::Configmap(s) => {
            let mut cm = ConfigMap::default();
            cm.metadata.name = s.name.clone();
            cm.metadata.namespace =
                crate::kubectl::namespace_or_default(s.namespace.as_deref()).to_string();
            for (k, v) in values(s, "ConfigMap")? {
                match String::from_utf8(v) {
                    Ok(text) => {
                        cm.data.insert(k, text);
                    }
                    Err(e) => {
                        cm.binary_data.insert(k, encode_base64(e.as_bytes()));
                    }
                }
            }
            Ok(Manifest::ConfigMap(Box::new(cm)))
        }
        CreateCmd::Secret {
            kind:
                SecretKind::Generic {
                    sources: s,
                    secret_type,
                },
        } => {
            let mut secret = Secret::default();
            secret.metadata.name = s.name.clone();
            secret.metadata.namespace =
                crate::kubectl::namespace_or_default(s.namespace.as_deref()).to_string();
            secret.r#type = secret_type
                .clone()
                .unwrap_or_else(|| drover_api::config_v1::SECRET_TYPE_OPAQUE.into());
            for (k, v) in values(s, "Secret")? {
                secret.data.insert(k, encode_base64(&v));
            }
            Ok(Manifest::Secret(Box::new(secret)))
        }
    }
}

fn sources(cmd: &CreateCmd) -> &Sources {
    match cmd {
        CreateCmd::Configmap(s) => s,
        CreateCmd::Secret {
            kind: SecretKind::Generic { sources, .. },
        } => sources,
    }
}

/// Runs `drover create`.
pub async fn create(c: &Client, cmd: &CreateCmd, out: &mut impl Write) -> Result<()> {
    let object = build(cmd)?;
    let s = sources(cmd);
    let kind = drover_api::Kind::of(&object);
    let print = |object: &Manifest, out: &mut dyn Write, action: &str| -> Result<()> {
        let v = printers::object_value(object);
        match &s.output {
            Some(Output::Json) => write!(out, "{}", printers::to_json(&v))?,
            Some(Output::Yaml) => write!(out, "{}", printers::to_yaml(&v))?,
            Some(Output::Name) => writeln!(out, "{}", printers::name(object))?,
            _ => writeln!(out, "{} {action}", object.reference())?,
        }
        Ok(())
    };
    if s.dry_run == Some(DryRun::Client) {
        return print(&object, out, "created (dry run)");
    }
    match c
        .get_object(kind.plural(), object.namespace(), object.name())
        .await
    {
        Ok(_) => bail!(
            "Error from server (AlreadyExists): {} {:?} already exists",
            kind.resource(),
            object.name()
        ),
        Err(crate::client::ClientError::Server {
            reason: Some(drover_proto::reason::Reason::NotFound),
            ..
        }) => {}
        Err(e) => return Err(kube(e)),
    }
    let text = serde_json::to_string(&printers::list_value(std::slice::from_ref(&object)))?;
    let dry = s.dry_run == Some(DryRun::Server);
    let results = c
        .apply_with(&text, dry, drover_api::FieldValidation::Strict)
        .await
        .map_err(kube)?;
    let suffix = if dry { " (server dry run)" } else { "" };
    for r in results {
        print(&r.object, out, &format!("created{suffix}"))?;
    }
    Ok(())
}
