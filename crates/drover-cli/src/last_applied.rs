//! The `kubectl.kubernetes.io/last-applied-configuration` annotation, as
//! `kubectl apply` writes it (`GetModifiedConfiguration` in
//! `k8s.io/kubectl/pkg/util/apply.go`): the object as the user gave it
//! (its namespace filled in), without that annotation (but with an
//! `annotations` map, `{}` when there is no other), encoded as Go's
//! `encoding/json` encodes it (compact, keys sorted, `<`, `>`, `&`, U+2028
//! and U+2029 escaped, a newline at the end). `drover apply` writes it so
//! that a later `kubectl apply` computes its three-way patch from it (and
//! removes the fields the user removed) instead of warning that the
//! annotation is missing.

use drover_api::Manifest;

/// The annotation's name.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The annotation's value for a manifest: the manifest with its namespace
/// defaulted (kubectl's resource builder sets it), without `status` and
/// without the annotation itself (an annotations map left empty stays, as
/// `{}`).
pub fn configuration(m: &Manifest) -> Result<String, serde_json::Error> {
    let mut m = m.clone();
    m.default_namespace();
    m.metadata_mut().annotations.remove(LAST_APPLIED);
    let mut v = serde_json::to_value(&m)?;
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
        // kubectl sets the annotations without its own, an empty map
        // when no other is left: `"annotations":{}`, never absent.
        if let Some(meta) = o
            .get_mut("metadata")
            .and_then(serde_json::Value::as_object_mut)
        {
            meta.entry("annotations")
                .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        }
    }
    let mut text = go_escape(&serde_json::to_string(&v)?);
    text.push('\n');
    Ok(text)
}

/// Sets the annotation on a manifest about to be applied.
pub fn annotate(m: &mut Manifest) -> Result<(), serde_json::Error> {
    let value = configuration(m)?;
    m.metadata_mut()
        .annotations
        .insert(LAST_APPLIED.to_owned(), value);
    Ok(())
}

/// JSON text with the characters Go's `encoding/json` escapes (HTML's
/// `<`, `>`, `&`, and the line and paragraph separators) escaped as it
/// does. They occur only inside strings, so the text stays the same JSON.
fn go_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Manifest {
        drover_api::parse_manifests(text).unwrap().remove(0)
    }

    #[test]
    fn the_configuration_is_the_object_as_given_compact_and_sorted() {
        let m = manifest(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: web\n  labels: {b: '2', a: '1'}\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: old\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: 'busybox:1', args: ['a<b && c>d']}]}\nstatus: {numberReady: 3}\n",
        );
        assert_eq!(
            configuration(&m).unwrap(),
            concat!(
                r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"annotations":{},"labels":{"a":"1","b":"2"},"name":"web","namespace":"default"},"#,
                r#""spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"#,
                r#""spec":{"containers":[{"args":["a\u003cb \u0026\u0026 c\u003ed"],"image":"busybox:1","name":"c"}]}}}}"#,
                "\n"
            )
        );
        let mut annotated = m.clone();
        annotate(&mut annotated).unwrap();
        let value = &annotated.metadata().annotations[LAST_APPLIED];
        assert_eq!(value, &configuration(&m).unwrap());
        // Annotating again gives the same value: the annotation is not in it.
        assert_eq!(&configuration(&annotated).unwrap(), value);
        let parsed: serde_json::Value = serde_json::from_str(value).unwrap();
        assert_eq!(
            parsed["spec"]["template"]["spec"]["containers"][0]["args"][0],
            "a<b && c>d"
        );
    }

    #[test]
    fn other_annotations_stay_and_a_cluster_object_has_no_namespace() {
        let m = manifest(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  namespace: x\n  annotations: {team: edge}\n",
        );
        assert_eq!(
            configuration(&m).unwrap(),
            "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"annotations\":{\"team\":\"edge\"},\"name\":\"n1\"}}\n"
        );
    }
}
