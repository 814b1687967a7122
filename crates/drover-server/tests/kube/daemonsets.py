"""The Python `kubernetes` client (PyPI), unmodified defaults, against a
drover server: lists DaemonSets, then watches them from the list's
resourceVersion. Run by tests/kube_python.rs.

usage: daemonsets.py KUBECONFIG NAMESPACE NEW_NAME STOP_LABEL TIMEOUT_SECONDS

Prints one JSON object per line, flushed:
  {"listed": {"all": [...], "namespaced": [...], "resourceVersion": "..."}}
  {"watching": true}        the watch request was answered (headers read)
  {"event": TYPE, "namespace": ..., "name": ..., "labels": {...}, ...}
  {"done": true, "events": N}
and exits 0 after a MODIFIED event of NEW_NAME carrying STOP_LABEL (k=v),
or 3 when the watch ends before it (timeout).
"""

import functools
import json
import sys

from kubernetes import client, config, watch


def say(obj):
    print(json.dumps(obj, sort_keys=True), flush=True)


def summary(ds):
    status = ds.status
    return {
        "namespace": ds.metadata.namespace,
        "name": ds.metadata.name,
        "desiredNumberScheduled": status.desired_number_scheduled if status else None,
        "labels": ds.metadata.labels or {},
    }


def main():
    kubeconfig, namespace, new_name, stop_label, timeout = sys.argv[1:6]
    stop_key, stop_value = stop_label.split("=", 1)
    config.load_kube_config(config_file=kubeconfig)
    apps = client.AppsV1Api()

    every = apps.list_daemon_set_for_all_namespaces()
    mine = apps.list_namespaced_daemon_set(namespace)
    say({
        "listed": {
            "all": [summary(d) for d in every.items],
            "namespaced": [summary(d) for d in mine.items],
            "resourceVersion": every.metadata.resource_version,
            "kind": every.kind,
            "apiVersion": every.api_version,
        }
    })

    # Watch.stream calls the list function lazily; the wrapper tells the
    # test once the server has answered the watch request.
    @functools.wraps(apps.list_daemon_set_for_all_namespaces)
    def opened(*args, **kwargs):
        resp = apps.list_daemon_set_for_all_namespaces(*args, **kwargs)
        say({"watching": True})
        return resp

    w = watch.Watch()
    seen = 0
    for ev in w.stream(
        opened,
        resource_version=every.metadata.resource_version,
        timeout_seconds=int(timeout),
    ):
        ds = ev["object"]
        seen += 1
        line = {"event": ev["type"], "type": type(ds).__name__}
        line.update(summary(ds))
        line["resourceVersion"] = ds.metadata.resource_version
        say(line)
        if (
            ev["type"] == "MODIFIED"
            and ds.metadata.name == new_name
            and (ds.metadata.labels or {}).get(stop_key) == stop_value
        ):
            w.stop()
            say({"done": True, "events": seen})
            return 0
    say({"done": False, "events": seen})
    return 3


if __name__ == "__main__":
    sys.exit(main())
