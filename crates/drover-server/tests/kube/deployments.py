#!/usr/bin/env python3
"""Deployments through the PyPI `kubernetes` client, as a user's script
drives them: create one (JSON), read it, scale it through the `scale`
subresource, list them. Prints one JSON object with what it saw.

usage: deployments.py KUBECONFIG NAMESPACE NAME
"""
import json
import sys

from kubernetes import client, config


def main():
    kubeconfig, namespace, name = sys.argv[1:4]
    config.load_kube_config(config_file=kubeconfig)
    apps = client.AppsV1Api()
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "local/busybox:1"}]},
            },
        },
    }
    created = apps.create_namespaced_deployment(namespace, body)
    scaled = apps.patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": 3}}
    )
    scale = apps.read_namespaced_deployment_scale(name, namespace)
    read = apps.read_namespaced_deployment(name, namespace)
    listed = apps.list_namespaced_deployment(namespace)
    every_rs = apps.list_replica_set_for_all_namespaces()
    print(json.dumps({
        "created": {
            "replicas": created.spec.replicas,
            "strategy": created.spec.strategy.type,
            "maxSurge": created.spec.strategy.rolling_update.max_surge,
        },
        "scaled": scaled.spec.replicas,
        "scale": {"kind": scale.kind, "replicas": scale.spec.replicas,
                  "selector": scale.status.selector},
        "read": read.spec.replicas,
        "listed": [d.metadata.name for d in listed.items],
        "listKind": listed.kind,
        "replicaSets": len(every_rs.items),
    }))


if __name__ == "__main__":
    main()
