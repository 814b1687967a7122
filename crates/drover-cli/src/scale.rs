//! `drover scale deploy/NAME --replicas N` (and `rs/NAME`) and `drover set
//! image KIND/NAME CONTAINER=IMAGE…`, worded like kubectl's
//! (`deployment.apps/web scaled`, `deployment.apps/web image updated`).
//! Each reads the object, changes it ([`with_replicas`], [`with_images`],
//! pure) and writes it back with compare-and-swap, again on a conflict.

use crate::client::Client;
use crate::kubectl;
use anyhow::{bail, Result};
use drover_api::{Kind, Manifest, PodTemplateSpec};
use std::io::Write;

/// Reads `kind/name`, changes it with `f`, writes it back with
/// compare-and-swap (again on a conflict: [`kubectl::read_modify_write`]).
/// `f` answers false when there is nothing to write.
pub(crate) async fn update<F>(
    c: &Client,
    kind: Kind,
    name: &str,
    ns: &str,
    mut f: F,
) -> Result<bool>
where
    F: FnMut(&mut Manifest) -> Result<bool>,
{
    // The last attempt's answer is the one written (or not).
    let mut changed = false;
    kubectl::read_modify_write(c, kind, ns, name, |m| {
        changed = f(m)?;
        Ok((String::new(), changed))
    })
    .await?;
    Ok(changed)
}

/// `m` with `spec.replicas` set; an error for a kind that has none.
pub fn with_replicas(m: &mut Manifest, replicas: i32) -> Result<()> {
    if replicas < 0 {
        bail!(
            "The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0"
        );
    }
    match m {
        Manifest::Deployment(d) => d.spec.replicas = Some(replicas),
        Manifest::ReplicaSet(rs) => rs.spec.replicas = Some(replicas),
        other => bail!(
            "cannot scale {}: drover scales deployments and replicasets",
            other.reference()
        ),
    }
    Ok(())
}

/// `drover scale KIND/NAME --replicas N`.
pub async fn scale(
    c: &Client,
    kind: Kind,
    name: &str,
    ns: &str,
    replicas: i32,
    out: &mut impl Write,
) -> Result<()> {
    if !matches!(kind, Kind::Deployment | Kind::ReplicaSet) {
        bail!(
            "cannot scale {}: drover scales deployments and replicasets (deploy/NAME, rs/NAME)",
            kind.plural()
        );
    }
    update(c, kind, name, ns, |m| {
        with_replicas(m, replicas).map(|_| true)
    })
    .await?;
    writeln!(out, "{}/{name} scaled", kind.singular())?;
    Ok(())
}

fn template_of(m: &mut Manifest) -> Result<&mut PodTemplateSpec> {
    Ok(match m {
        Manifest::Deployment(d) => &mut d.spec.template,
        Manifest::ReplicaSet(rs) => &mut rs.spec.template,
        Manifest::DaemonSet(ds) => &mut ds.spec.template,
        other => bail!(
            "cannot set the image of {}: drover sets images of deployments, replicasets and daemonsets",
            other.reference()
        ),
    })
}

/// `CONTAINER=IMAGE` pairs, checked.
pub fn parse_images(pairs: &[String]) -> Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((c, i)) if !c.is_empty() && !i.is_empty() => Ok((c.to_owned(), i.to_owned())),
            _ => bail!("{p:?}: give images as CONTAINER=IMAGE (or *=IMAGE for every container)"),
        })
        .collect()
}

/// The template's containers with their new images,
/// as kubectl's `set image` changes them: `*` names every container, any
/// other name must exist. Answers whether an image changed.
pub fn with_images(t: &mut PodTemplateSpec, images: &[(String, String)]) -> Result<bool> {
    let mut changed = false;
    for (name, image) in images {
        let mut found = false;
        for c in t.spec.containers.iter_mut() {
            if name == "*" || c.name == *name {
                found = true;
                changed |= c.image != *image;
                c.image = image.clone();
            }
        }
        if !found {
            bail!("unable to find container named {name:?}");
        }
    }
    Ok(changed)
}

/// `drover set image KIND/NAME CONTAINER=IMAGE…`.
pub async fn set_image(
    c: &Client,
    kind: Kind,
    name: &str,
    ns: &str,
    pairs: &[String],
    out: &mut impl Write,
) -> Result<()> {
    let images = parse_images(pairs)?;
    let changed = update(c, kind, name, ns, |m| with_images(template_of(m)?, &images)).await?;
    if changed {
        writeln!(out, "{}/{name} image updated", kind.singular())?;
    } else {
        writeln!(out, "{}/{name} image unchanged", kind.singular())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Manifest {
        Manifest::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "web", "image": "a:1"}, {"name": "side", "image": "b:1"}]}}}}))
        .unwrap()
    }

    #[test]
    fn replicas_of_deployments_and_replica_sets_only() {
        let mut d = deployment();
        with_replicas(&mut d, 3).unwrap();
        let Manifest::Deployment(ref dd) = d else {
            panic!()
        };
        assert_eq!(dd.spec.replicas, Some(3));
        assert!(with_replicas(&mut d, -1).is_err());
        let mut pod = Manifest::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"}, "spec": {"containers": []}}))
        .unwrap();
        let e = with_replicas(&mut pod, 1).unwrap_err().to_string();
        assert_eq!(
            e,
            "cannot scale pod/p: drover scales deployments and replicasets"
        );
    }

    #[test]
    fn images_by_container_name_or_all() {
        let mut d = deployment();
        let t = template_of(&mut d).unwrap();
        let one = parse_images(&["web=a:2".into()]).unwrap();
        assert!(with_images(t, &one).unwrap());
        assert_eq!(t.spec.containers[0].image, "a:2");
        assert_eq!(t.spec.containers[1].image, "b:1");
        assert!(!with_images(t, &one).unwrap(), "the same image again");
        let all = parse_images(&["*=c:3".into()]).unwrap();
        assert!(with_images(t, &all).unwrap());
        assert!(t.spec.containers.iter().all(|c| c.image == "c:3"));
        let e = with_images(t, &parse_images(&["nope=x".into()]).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "unable to find container named \"nope\"");
        assert!(parse_images(&["web".into()]).is_err());
        assert!(parse_images(&["=x".into()]).is_err());
    }
}
