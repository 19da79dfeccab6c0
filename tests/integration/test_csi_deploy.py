#!/usr/bin/env python3
"""test_csi_deploy.py - the CSI deployment files of csi/deploy/ (and the
image's Dockerfile, node/deploy/Dockerfile, which both drivers share) agree
with each other, with the plugin's contract and with the option table.

    test_csi_deploy.py [--only NAME[,NAME...]] [--list]

Needs PyYAML only: no root, no server, no binary.  Every YAML file of
csi/deploy/ is parsed, and each check below looks at the parsed objects
(and at csi.conf inside configmap.yaml, parsed as INI).  The names the
checks accept come from the C sources: the volume options and limit keys
from node/node_opts.c, the [node] keys from node/node_conf.c
(the CSI plugin's node config has the same format and keys).

Each check is run twice: on the files as they are, where it must find
nothing, and on copies broken in the way the check is about (its
mutations), where it must find something; a check that cannot fail fails.
install_sh runs csi/deploy/install.sh (the init container, with the steps
it shares, node/deploy/install-tierfs.sh) on a fake node directory.

Ends with "csideploy: N passed, N failed".
"""
import argparse
import configparser
import copy
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
DEPLOY = os.path.join(TOP, "csi", "deploy")

DRIVER = "csi.tierfs.io"  # the contract's driver name
SOCKET = "csi.sock"
KUBELET_DIR = "/var/lib/kubelet"
REGISTRY_DIR = KUBELET_DIR + "/plugins_registry"
NODE_SECTIONS = {"node", "defaults", "limits", "pod"}
SECRET_KEYS = {"accessKey", "secretKey"}
SECRET_OPTIONAL = {"sessionToken"}
# The host directories the plugin container must see at their own paths.
SAME_PATH = ["/dev/fuse", "/run/tierfs", "/var/cache/tierfs", KUBELET_DIR, "/run/systemd"]


def read(path):
    with open(path) as f:
        return f.read()


def known_names():
    """{'options': [...], 'limits': [...], 'node': [...]} from the C tables."""
    opts_c = read(os.path.join(TOP, "node", "node_opts.c"))
    node_c = read(os.path.join(TOP, "node", "node_conf.c"))
    table = opts_c[opts_c.index("defs[TFS_NODE_OPT_COUNT]"):]
    table = table[:table.index("};")]
    options = re.findall(r'\[TFS_NODE_OPT_\w+\]\s*=\s*\{\s*"(\w+)"', table)
    limits = re.findall(r'TFS_NODE_LIMIT_\w+,\s*"(\w+)"\s*\}', table)
    node = re.findall(r'NK\("(\w+)"', node_c)
    conf_c = read(os.path.join(TOP, "src", "conf_keys.c"))
    tierfs = re.findall(r'KEY\("(\w+)",\s*"(\w+)"', conf_c)
    assert len(options) >= 14 and len(limits) >= 4 and len(node) >= 16, (options, limits, node)
    assert ("backend", "ca_file") in tierfs, tierfs
    return {"options": options, "limits": limits, "node": node, "tierfs": tierfs}


def docs_option_table(text):
    """The option names of the first table of docs/kubernetes.md whose
    header starts with '| option |'."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\|\s*option\s*\|", line):
            names = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                m = re.match(r"^\|\s*`(\w+)`\s*\|", row)
                if m:
                    names.append(m.group(1))
            return names
    return []


def load():
    """The manifests: {file name: [objects]}, plus the texts the checks use."""
    m = {"files": {}}
    for name in sorted(os.listdir(DEPLOY)):
        if name.endswith((".yaml", ".yml")):
            with open(os.path.join(DEPLOY, name)) as f:
                m["files"][name] = [o for o in yaml.safe_load_all(f) if o is not None]
    m["install"] = read(os.path.join(DEPLOY, "install.sh"))
    m["dockerfile"] = read(os.path.join(TOP, "node", "deploy", "Dockerfile"))
    m["docs"] = read(os.path.join(TOP, "docs", "kubernetes.md"))
    return m


# ---- accessors (raise KeyError/ValueError/StopIteration on a shape they do
# not expect; the runner reports that as the check's failure)

def objs(m, kind):
    return [o for lst in m["files"].values() for o in lst if o.get("kind") == kind]


def one(m, kind):
    lst = objs(m, kind)
    if len(lst) != 1:
        raise ValueError("%d objects of kind %s, not 1" % (len(lst), kind))
    return lst[0]


def pod_spec(m):
    return one(m, "DaemonSet")["spec"]["template"]["spec"]


def container(m, name):
    spec = pod_spec(m)
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c["name"] == name:
            return c
    raise ValueError("no container %s in the DaemonSet" % name)


def arg(c, flag):
    """The value of --flag=VALUE (or -flag=VALUE) in c's args, or None."""
    for a in c.get("args", []):
        m = re.match(r"^--?%s=(.*)$" % re.escape(flag), a)
        if m:
            return m.group(1)
    return None


def volumes(m):
    return {v["name"]: v for v in pod_spec(m).get("volumes", [])}


def mount_of(m, c, path):
    """(volumeMount, volume) of container c whose mountPath is path."""
    for vm in c.get("volumeMounts", []):
        if vm["mountPath"].rstrip("/") == path.rstrip("/"):
            return vm, volumes(m).get(vm["name"])
    return None, None


def host_mount_covering(m, c, path):
    """The hostPath mount of c, mounted at its host path, that holds path."""
    best = None
    for vm in c.get("volumeMounts", []):
        v = volumes(m).get(vm["name"]) or {}
        hp = v.get("hostPath", {}).get("path")
        mp = vm["mountPath"].rstrip("/")
        if hp and hp.rstrip("/") == mp and (path == mp or path.startswith(mp + "/")):
            if best is None or len(mp) > len(best[0]["mountPath"]):
                best = (vm, v)
    return best


def pods(m):
    return objs(m, "Pod")


def inline_csi_volumes(m):
    return [(p, v) for p in pods(m) for v in p["spec"].get("volumes", []) if "csi" in v]


def node_conf_text(m):
    cm = one(m, "ConfigMap")
    conf = arg(container(m, "tierfs-csi"), "config")
    return cm["data"][os.path.basename(conf)]


def parse_ini(text):
    cp = configparser.ConfigParser(interpolation=None, comment_prefixes=("#", ";"),
                                   inline_comment_prefixes=None, strict=True,
                                   default_section="\x00none")
    cp.read_string(text)
    return cp


# ---- the checks: each returns a list of problems (empty: fine)

def c_kinds(m):
    want = {"CSIDriver": ("storage.k8s.io/v1", 1), "DaemonSet": ("apps/v1", 1),
            "ConfigMap": ("v1", 1), "Secret": ("v1", 1), "PersistentVolume": ("v1", 1),
            "PersistentVolumeClaim": ("v1", 1), "Pod": ("v1", 2)}
    p = []
    for name, lst in m["files"].items():
        if not lst:
            p.append("%s holds no object" % name)
        for o in lst:
            k = o.get("kind")
            if k not in want:
                p.append("%s: unexpected kind %s" % (name, k))
            elif o.get("apiVersion") != want[k][0]:
                p.append("%s: %s has apiVersion %s, not %s" % (name, k, o.get("apiVersion"),
                                                               want[k][0]))
            if not o.get("metadata", {}).get("name"):
                p.append("%s: no metadata.name" % name)
    for k, (_, n) in want.items():
        if len(objs(m, k)) != n:
            p.append("%d objects of kind %s, not %d" % (len(objs(m, k)), k, n))
    return p


def c_csidriver(m):
    d = one(m, "CSIDriver")
    s = d["spec"]
    p = []
    if d["metadata"]["name"] != DRIVER:
        p.append("the CSIDriver is %s, not %s" % (d["metadata"]["name"], DRIVER))
    expect = {"attachRequired": False, "podInfoOnMount": True, "fsGroupPolicy": "File",
              "requiresRepublish": False}
    for k, v in expect.items():
        if s.get(k) != v:
            p.append("CSIDriver spec.%s is %r, not %r" % (k, s.get(k), v))
    if sorted(s.get("volumeLifecycleModes", [])) != ["Ephemeral", "Persistent"]:
        p.append("volumeLifecycleModes %r" % s.get("volumeLifecycleModes"))
    return p


def c_driver_name(m):
    """The CSIDriver's name is the one in every volume, in the plugin
    directory and in the path the registrar registers."""
    name = one(m, "CSIDriver")["metadata"]["name"]
    p = []
    if name != DRIVER:
        p.append("CSIDriver %s is not the plugin's name %s" % (name, DRIVER))
    pv = one(m, "PersistentVolume")
    if pv["spec"]["csi"]["driver"] != name:
        p.append("pv.yaml: driver %s" % pv["spec"]["csi"]["driver"])
    for pod, v in inline_csi_volumes(m):
        if v["csi"]["driver"] != name:
            p.append("pod %s: driver %s" % (pod["metadata"]["name"], v["csi"]["driver"]))
    reg = arg(container(m, "node-driver-registrar"), "kubelet-registration-path") or ""
    if os.path.basename(os.path.dirname(reg)) != name:
        p.append("the registrar registers %s, not in a directory named %s" % (reg, name))
    hp = volumes(m)["socket-dir"]["hostPath"]["path"]
    if os.path.basename(hp.rstrip("/")) != name:
        p.append("the plugin directory %s is not named %s" % (hp, name))
    return p


def c_registration(m):
    """The registrar registers the socket the plugin serves, as the host
    sees it: the plugin directory's hostPath + csi.sock, and writes its
    registration into the kubelet's plugins_registry."""
    p = []
    reg_c = container(m, "node-driver-registrar")
    reg = arg(reg_c, "kubelet-registration-path")
    addr = arg(reg_c, "csi-address")
    if reg is None or addr is None:
        return ["the registrar lacks --kubelet-registration-path or --csi-address"]
    vm, v = mount_of(m, reg_c, os.path.dirname(addr))
    if v is None or "hostPath" not in v:
        return ["the registrar's %s is not a hostPath mount" % os.path.dirname(addr)]
    want = v["hostPath"]["path"].rstrip("/") + "/" + os.path.basename(addr)
    if reg != want:
        p.append("the registrar registers %s, but its socket %s is %s on the host"
                 % (reg, addr, want))
    if os.path.basename(addr) != SOCKET:
        p.append("the socket is %s, not %s" % (addr, SOCKET))
    if not v["hostPath"]["path"].startswith(KUBELET_DIR + "/plugins/"):
        p.append("the plugin directory %s is not under %s/plugins" % (v["hostPath"]["path"],
                                                                     KUBELET_DIR))
    if v["hostPath"].get("type") != "DirectoryOrCreate":
        p.append("the plugin directory's hostPath type is %r" % v["hostPath"].get("type"))
    rvm, rv = mount_of(m, reg_c, "/registration")
    if rv is None or rv.get("hostPath", {}).get("path") != REGISTRY_DIR:
        p.append("/registration in the registrar is not the hostPath %s" % REGISTRY_DIR)
    return p


def c_endpoint(m):
    """tierfs-csi's --endpoint is the socket the registrar and the
    livenessprobe talk to, through the same volume."""
    p = []
    plugin = container(m, "tierfs-csi")
    ep = arg(plugin, "endpoint") or ""
    if not ep.startswith("unix:///"):
        return ["tierfs-csi --endpoint=%r is not unix:///ABS" % ep]
    sock = ep[len("unix://"):]
    vm, _ = mount_of(m, plugin, os.path.dirname(sock))
    for name in ("node-driver-registrar", "livenessprobe"):
        c = container(m, name)
        addr = arg(c, "csi-address")
        if addr != sock:
            p.append("%s --csi-address=%s, but tierfs-csi serves %s" % (name, addr, sock))
            continue
        cvm, _ = mount_of(m, c, os.path.dirname(addr))
        if vm is None or cvm is None or cvm["name"] != vm["name"]:
            p.append("%s and tierfs-csi do not share the volume of %s" % (name,
                                                                         os.path.dirname(sock)))
    return p


def c_node_id(m):
    c = container(m, "tierfs-csi")
    p = []
    if arg(c, "node-id") != "$(KUBE_NODE_NAME)":
        p.append("--node-id is %r, not $(KUBE_NODE_NAME)" % arg(c, "node-id"))
    env = {e["name"]: e for e in c.get("env", [])}
    fp = env.get("KUBE_NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if fp != "spec.nodeName":
        p.append("KUBE_NODE_NAME comes from %r, not spec.nodeName" % fp)
    return p


def c_config(m):
    """--config is a key of the ConfigMap, mounted in the DaemonSet's
    namespace at the directory of --config."""
    p = []
    c = container(m, "tierfs-csi")
    conf = arg(c, "config")
    if not conf or not conf.startswith("/"):
        return ["tierfs-csi has no absolute --config"]
    cm = one(m, "ConfigMap")
    ds = one(m, "DaemonSet")
    if cm["metadata"].get("namespace") != ds["metadata"].get("namespace"):
        p.append("the ConfigMap is in %s, the DaemonSet in %s" % (cm["metadata"].get("namespace"),
                                                                  ds["metadata"].get("namespace")))
    vm, v = mount_of(m, c, os.path.dirname(conf))
    if v is None or "configMap" not in v:
        return p + ["%s is not a ConfigMap mount" % os.path.dirname(conf)]
    if v["configMap"]["name"] != cm["metadata"]["name"]:
        p.append("the mount names ConfigMap %s, not %s" % (v["configMap"]["name"],
                                                           cm["metadata"]["name"]))
    items = v["configMap"].get("items")
    files = [i["path"] for i in items] if items else list(cm.get("data", {}))
    if os.path.basename(conf) not in files:
        p.append("--config=%s, but the ConfigMap holds %s" % (conf, files))
    # Its other keys: files the node config names in the same directory.
    named = {os.path.basename(conf)}
    if os.path.basename(conf) in cm.get("data", {}):
        ini = parse_ini(cm["data"][os.path.basename(conf)])
        for key in ("tierfs_conf", "credentials_file"):
            path = ini.get("node", key, fallback="")
            if os.path.dirname(path) == os.path.dirname(conf):
                named.add(os.path.basename(path))
    if set(cm.get("data", {})) != named:
        p.append("the ConfigMap's keys %s are not the files the plugin reads, %s"
                 % (sorted(cm.get("data", {})), sorted(named)))
    return p


def c_daemon_conf(m):
    """The daemons' base config (tierfs_conf, a key of the ConfigMap)
    parses as INI with tierfs.conf keys only, and its ca_file is the CA
    bundle the image installs on the node, on a same-path host mount."""
    p = []
    c = container(m, "tierfs-csi")
    conf = arg(c, "config") or ""
    node = parse_ini(node_conf_text(m))
    base = node.get("node", "tierfs_conf", fallback="")
    if os.path.dirname(base) != os.path.dirname(conf):
        return ["[node] tierfs_conf = %r is not a file of the ConfigMap" % base]
    cm = one(m, "ConfigMap")
    text = cm["data"].get(os.path.basename(base))
    if text is None:
        return ["the ConfigMap has no key %s" % os.path.basename(base)]
    try:
        ini = parse_ini(text)
    except configparser.Error as e:
        return ["%s does not parse: %s" % (base, e)]
    known = set(known_names()["tierfs"])
    for sec in ini.sections():
        for k in ini[sec]:
            if (sec, k) not in known:
                p.append("%s: [%s] %s is not a tierfs.conf key" % (base, sec, k))
    ca = ini.get("backend", "ca_file", fallback="")
    src = dict(re.findall(r"^(\w+)=\$\{\1:-([^}]*)\}$", m["install"], re.M)).get("SRC", "")
    if not src or not ca.startswith(src + "/"):
        p.append("[backend] ca_file = %r is not installed with tierfs (%s)" % (ca, src))
    elif "/stage%s" % ca not in m["dockerfile"]:
        p.append("the Dockerfile does not put a CA bundle at %s" % ca)
    if ca and host_mount_covering(m, c, ca) is None:
        p.append("[backend] ca_file = %s is not on a host directory mounted at its own path" % ca)
    return p


def c_volume_mounts(m):
    """Every volumeMount names a declared volume, no two mounts of a
    container share a path, and every volume is used."""
    p = []
    spec = pod_spec(m)
    vols = volumes(m)
    if len(vols) != len(spec.get("volumes", [])):
        p.append("two volumes with one name")
    used = set()
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        paths = set()
        for vm in c.get("volumeMounts", []):
            if vm["name"] not in vols:
                p.append("%s mounts undeclared volume %s" % (c["name"], vm["name"]))
            if vm["mountPath"] in paths:
                p.append("%s mounts two volumes at %s" % (c["name"], vm["mountPath"]))
            paths.add(vm["mountPath"])
            used.add(vm["name"])
    for name in vols:
        if name not in used:
            p.append("volume %s is mounted nowhere" % name)
    # Pods too: their mounts name their volumes.
    for pod in pods(m):
        pv = {v["name"] for v in pod["spec"].get("volumes", [])}
        for c in pod["spec"]["containers"]:
            for vm in c.get("volumeMounts", []):
                if vm["name"] not in pv:
                    p.append("pod %s mounts undeclared volume %s" % (pod["metadata"]["name"],
                                                                      vm["name"]))
    return p


def c_privileges(m):
    """tierfs-csi is privileged, with the kubelet's directory at its own
    path and Bidirectional propagation; only privileged containers use
    Bidirectional (the API server refuses it otherwise); the pod shares
    the host's PID and network namespaces (daemons outlive the container)."""
    p = []
    spec = pod_spec(m)
    c = container(m, "tierfs-csi")
    if c.get("securityContext", {}).get("privileged") is not True:
        p.append("tierfs-csi is not privileged")
    vm, v = mount_of(m, c, KUBELET_DIR)
    if vm is None:
        p.append("tierfs-csi does not mount %s" % KUBELET_DIR)
    else:
        if v.get("hostPath", {}).get("path") != KUBELET_DIR:
            p.append("%s in tierfs-csi is not the host's %s" % (KUBELET_DIR, KUBELET_DIR))
        if vm.get("mountPropagation") != "Bidirectional":
            p.append("%s has propagation %r, not Bidirectional" % (KUBELET_DIR,
                                                                   vm.get("mountPropagation")))
        if vm.get("readOnly"):
            p.append("%s is read-only" % KUBELET_DIR)
    for cc in spec.get("containers", []) + spec.get("initContainers", []):
        for cvm in cc.get("volumeMounts", []):
            if cvm.get("mountPropagation") == "Bidirectional" and \
                    cc.get("securityContext", {}).get("privileged") is not True:
                p.append("%s: Bidirectional in a container that is not privileged" % cc["name"])
    for k in ("hostPID", "hostNetwork"):
        if spec.get(k) is not True:
            p.append("the DaemonSet's pods lack %s: true" % k)
    return p


def c_same_paths(m):
    """The host directories the daemons use are mounted at their own
    paths in tierfs-csi, and so is every path of the node config, the
    plugin's own binary and the tierfs binary."""
    p = []
    c = container(m, "tierfs-csi")
    for path in SAME_PATH:
        if host_mount_covering(m, c, path) is None or \
                host_mount_covering(m, c, path)[0]["mountPath"].rstrip("/") != path:
            p.append("%s is not the host's %s mounted at the same path" % (path, path))
    if volumes(m).get("fuse", {}).get("hostPath", {}).get("type") != "CharDevice":
        p.append("/dev/fuse is not a CharDevice hostPath")
    ini = parse_ini(node_conf_text(m))
    node = ini["node"] if ini.has_section("node") else {}
    for key in ("tierfs", "cache_root", "state_dir", "daemon_log", "log_file",
                "credentials_file", "tierfs_conf"):
        path = node.get(key, "")
        if key == "tierfs_conf" or key == "credentials_file":
            # Files of the ConfigMap's directory are fine too.
            conf = arg(c, "config") or ""
            if path and os.path.dirname(path) == os.path.dirname(conf):
                continue
        if path and host_mount_covering(m, c, path) is None:
            p.append("[node] %s = %s is not on a host directory mounted at its own path"
                     % (key, path))
    cmd = (c.get("command") or [""])[0]
    if not cmd.startswith("/") or host_mount_covering(m, c, cmd) is None:
        p.append("tierfs-csi runs %r, not a file of the node" % cmd)
    return p


def c_liveness(m):
    """The kubelet's livenessProbe of tierfs-csi reaches the livenessprobe
    sidecar: the port named healthz is the sidecar's --health-port."""
    p = []
    c = container(m, "tierfs-csi")
    ports = {pt.get("name"): pt["containerPort"] for pt in c.get("ports", [])}
    if "healthz" not in ports:
        return ["tierfs-csi has no port named healthz"]
    hg = c.get("livenessProbe", {}).get("httpGet", {})
    if hg.get("port") not in ("healthz", ports["healthz"]) or hg.get("path") != "/healthz":
        p.append("tierfs-csi's livenessProbe is %r, not GET /healthz on healthz" % hg)
    lp = container(m, "livenessprobe")
    port = arg(lp, "health-port")
    if port is None and arg(lp, "http-endpoint"):
        port = arg(lp, "http-endpoint").rsplit(":", 1)[-1]
    if str(ports["healthz"]) != str(port if port is not None else 9808):
        p.append("healthz is port %s, the livenessprobe listens on %s"
                 % (ports["healthz"], port if port is not None else "9808 (its default)"))
    return p


def c_images(m):
    p = []
    want = {"node-driver-registrar": "registry.k8s.io/sig-storage/csi-node-driver-registrar:",
            "livenessprobe": "registry.k8s.io/sig-storage/livenessprobe:"}
    for name, prefix in want.items():
        img = container(m, name)["image"]
        if not img.startswith(prefix) or len(img) == len(prefix):
            p.append("%s runs %s, not %s<tag>" % (name, img, prefix))
    spec = pod_spec(m)
    ours = {c["image"] for c in spec.get("containers", []) + spec.get("initContainers", [])
            if c["name"] not in want}
    if len(ours) != 1:
        p.append("the init and plugin containers run different images: %s" % sorted(ours))
    return p


def c_install_layout(m):
    """The init container runs install.sh from the image and writes the
    node's /opt/tierfs; the plugin runs from there; the node config's
    tierfs is the image's prefix on the node."""
    p = []
    inst = container(m, "install")
    if inst not in pod_spec(m).get("initContainers", []):
        p.append("install is not an init container")
    defaults = dict(re.findall(r"^(\w+)=\$\{\1:-([^}]*)\}$", m["install"], re.M))
    if sorted(defaults) != ["HOST_OPT", "SRC"]:
        return p + ["install.sh's variables are %s" % sorted(defaults)]
    if "COPY ${DRIVER}/deploy/install.sh /install.sh" not in m["dockerfile"] or \
            "COPY node/deploy/install-tierfs.sh /install-tierfs.sh" not in m["dockerfile"] or \
            'common=$(dirname "$0")/install-tierfs.sh' not in m["install"]:
        p.append("the Dockerfile does not put install.sh at /install.sh")
    if "docker build -f node/deploy/Dockerfile --build-arg DRIVER=csi " not in m["docs"]:
        p.append("docs/kubernetes.md does not build the image with DRIVER=csi")
    if inst.get("command") != ["/install.sh"]:
        p.append("the init container runs %r" % inst.get("command"))
    env = {e["name"]: e.get("value") for e in inst.get("env", [])}
    host_opt = env.get("HOST_OPT", defaults["HOST_OPT"])
    vm, v = mount_of(m, inst, host_opt)
    if v is None or vm.get("readOnly"):
        return p + ["HOST_OPT=%s is not a writable mount of the init container" % host_opt]
    node_opt = v.get("hostPath", {}).get("path", "")
    src = defaults["SRC"]
    if node_opt + "/current" != src:
        p.append("install.sh puts %s/current on the node, the image has %s" % (node_opt, src))
    if "--prefix=%s " % src not in m["dockerfile"] or \
            "-Wl,-rpath,%s/lib" % src not in m["dockerfile"]:
        p.append("the Dockerfile does not build for %s" % src)
    plugin = container(m, "tierfs-csi")
    pvm, pv = mount_of(m, plugin, node_opt)
    if pv is None or pv.get("hostPath", {}).get("path") != node_opt:
        p.append("tierfs-csi does not see the node's %s at %s" % (node_opt, node_opt))
    if (plugin.get("command") or [""])[0] != src + "/sbin/tierfs-csi":
        p.append("tierfs-csi runs %r, not %s/sbin/tierfs-csi" % (plugin.get("command"), src))
    ini = parse_ini(node_conf_text(m))
    if ini.get("node", "tierfs", fallback=None) != src + "/bin/tierfs":
        p.append("[node] tierfs is %r, not %s/bin/tierfs" % (ini.get("node", "tierfs",
                                                                      fallback=None), src))
    return p


def c_volume_attributes(m):
    """Every volumeAttributes key is a known option that the ConfigMap's
    [pod] allow lists, every value a string; a volume names its source
    once (source, or bucket and prefix)."""
    p = []
    names = set(known_names()["options"])
    ini = parse_ini(node_conf_text(m))
    allow = set(ini.get("pod", "allow", fallback="").replace(",", " ").split())
    vols = [("pv.yaml", one(m, "PersistentVolume")["spec"]["csi"])]
    vols += [("pod " + pod["metadata"]["name"], v["csi"]) for pod, v in inline_csi_volumes(m)]
    for where, csi in vols:
        attrs = csi.get("volumeAttributes") or {}
        if not attrs:
            p.append("%s: no volumeAttributes" % where)
        for k, v in attrs.items():
            if k not in names:
                p.append("%s: %s is not a volume option (%s)"
                         % (where, k, ", ".join(sorted(names))))
            elif k not in allow:
                p.append("%s: %s is not in the ConfigMap's [pod] allow" % (where, k))
            if not isinstance(v, str):
                p.append("%s: %s is %r, not a string" % (where, k, v))
        if "source" in attrs and ({"bucket", "prefix"} & set(attrs)):
            p.append("%s: source together with bucket or prefix" % where)
        if not ({"source", "bucket"} & set(attrs)):
            p.append("%s: names no bucket" % where)
        if csi.get("fsType", "") not in ("", "tierfs"):
            p.append("%s: fsType %s" % (where, csi.get("fsType")))
    return p


def c_secrets(m):
    """The Secret has type tierfs/tierfs and the keys accessKey and
    secretKey (sessionToken optional, nothing else), and every volume
    names it where the kubelet looks for it."""
    p = []
    sec = one(m, "Secret")
    if sec.get("type") != "tierfs/tierfs":
        p.append("the Secret's type is %r" % sec.get("type"))
    keys = set(sec.get("stringData", {})) | set(sec.get("data", {}))
    if not SECRET_KEYS <= keys or not keys <= SECRET_KEYS | SECRET_OPTIONAL:
        p.append("the Secret's keys are %s" % sorted(keys))
    name, ns = sec["metadata"]["name"], sec["metadata"].get("namespace")
    ref = one(m, "PersistentVolume")["spec"]["csi"].get("nodeStageSecretRef", {})
    if ref.get("name") != name or ref.get("namespace") != ns:
        p.append("pv.yaml's nodeStageSecretRef %r is not %s/%s" % (ref, ns, name))
    inline = inline_csi_volumes(m)
    if not inline:
        p.append("no inline volume")
    for pod, v in inline:
        ref = v["csi"].get("nodePublishSecretRef", {})
        if ref.get("name") != name or pod["metadata"].get("namespace") != ns:
            p.append("pod %s: nodePublishSecretRef %r is not %s in its namespace"
                     % (pod["metadata"]["name"], ref, name))
    return p


def c_node_config(m):
    """csi.conf parses as INI with only the node config's sections and
    keys, and the CSI plugin's own state and cache directories."""
    p = []
    known = known_names()
    try:
        ini = parse_ini(node_conf_text(m))
    except configparser.Error as e:
        return ["csi.conf does not parse: %s" % e]
    extra = set(ini.sections()) - NODE_SECTIONS
    if extra:
        p.append("unknown sections %s" % sorted(extra))
    lower = {s: {k.lower() for k in known[s]} for s in ("node", "options", "limits")}
    for s, valid in (("node", lower["node"]), ("defaults", lower["options"]),
                     ("limits", lower["limits"]), ("pod", {"allow"})):
        if ini.has_section(s):
            for k in ini[s]:
                if k not in valid:
                    p.append("[%s] %s is not a key" % (s, k))
    allow = ini.get("pod", "allow", fallback="").replace(",", " ").split()
    for a in allow:
        if a not in known["options"]:
            p.append("[pod] allow names %s, not an option" % a)
    want = {"state_dir": "/run/tierfs/csi", "cache_root": "/var/cache/tierfs/csi"}
    for k, v in want.items():
        if ini.get("node", k, fallback=None) != v:
            p.append("[node] %s is %r, not %s" % (k, ini.get("node", k, fallback=None), v))
    return p


def c_claim(m):
    """pvc.yaml binds pv.yaml statically; pod.yaml uses it as a non-root
    user with an fsGroup."""
    p = []
    pv, pvc = one(m, "PersistentVolume"), one(m, "PersistentVolumeClaim")
    if pvc["spec"].get("volumeName") != pv["metadata"]["name"]:
        p.append("the claim's volumeName is %r" % pvc["spec"].get("volumeName"))
    if pvc["spec"].get("storageClassName") != "" or pv["spec"].get("storageClassName") != "":
        p.append("the PV and the claim must both have storageClassName \"\"")
    if not set(pvc["spec"]["accessModes"]) <= set(pv["spec"]["accessModes"]):
        p.append("the claim asks for access modes the PV lacks")
    if pvc["spec"]["resources"]["requests"]["storage"] != pv["spec"]["capacity"]["storage"]:
        p.append("the claim's size differs from the PV's")
    if not pv["spec"]["csi"].get("volumeHandle"):
        p.append("the PV has no volumeHandle")
    users = [pod for pod in pods(m)
             for v in pod["spec"].get("volumes", []) if "persistentVolumeClaim" in v]
    if len(users) != 1:
        return p + ["%d pods use the claim" % len(users)]
    pod = users[0]
    for v in pod["spec"]["volumes"]:
        if "persistentVolumeClaim" in v and \
                v["persistentVolumeClaim"]["claimName"] != pvc["metadata"]["name"]:
            p.append("pod.yaml claims %s" % v["persistentVolumeClaim"]["claimName"])
    if pod["metadata"].get("namespace") != pvc["metadata"].get("namespace"):
        p.append("pod.yaml is not in the claim's namespace")
    sc = pod["spec"].get("securityContext", {})
    if not isinstance(sc.get("fsGroup"), int) or sc.get("fsGroup") <= 0:
        p.append("pod.yaml has no fsGroup")
    if not isinstance(sc.get("runAsUser"), int) or sc.get("runAsUser") == 0:
        p.append("pod.yaml does not run as a non-root user")
    return p


def c_inline(m):
    """inline-pod.yaml has one inline CSI volume: no volumeHandle (the
    kubelet makes one), read-only, mounted by its container."""
    p = []
    inline = inline_csi_volumes(m)
    if len(inline) != 1:
        return ["%d inline csi volumes, not 1" % len(inline)]
    pod, v = inline[0]
    if "volumeHandle" in v["csi"]:
        p.append("an inline volume has no volumeHandle")
    if v["csi"].get("readOnly") is not True:
        p.append("the inline dataset is not readOnly: true")
    if (v["csi"].get("volumeAttributes") or {}).get("readOnly") != "true":
        p.append("the inline dataset lacks the readOnly attribute \"true\"")
    mounted = [vm for c in pod["spec"]["containers"] for vm in c.get("volumeMounts", [])
               if vm["name"] == v["name"]]
    if not mounted:
        p.append("no container mounts the inline volume")
    return p


def c_options_documented(m):
    """The option table of docs/kubernetes.md lists exactly the options of
    node/node_opts.c (the table both drivers share)."""
    doc = docs_option_table(m["docs"])
    code = known_names()["options"]
    if doc != code:
        return ["docs/kubernetes.md's option table %s differs from node_opts.c's %s" % (doc, code)]
    if DRIVER not in m["docs"]:
        return ["docs/kubernetes.md never names %s" % DRIVER]
    return []


# ---- mutations: each breaks a copy of the manifests the way its check is about

def set_arg(cname, flag, value):
    def mut(m):
        c = container(m, cname)
        c["args"] = [a for a in c["args"] if not a.startswith("--%s=" % flag)] + \
            ["--%s=%s" % (flag, value)]
    return mut


def set_volume(name, key, value):
    def mut(m):
        v = volumes(m)[name]
        sub = v
        for k in key[:-1]:
            sub = sub[k]
        sub[key[-1]] = value
    return mut


def set_mount(cname, vol, key, value):
    def mut(m):
        for vm in container(m, cname)["volumeMounts"]:
            if vm["name"] == vol:
                if value is None:
                    vm.pop(key, None)
                else:
                    vm[key] = value
    return mut


def set_conf(section, key, value):
    def mut(m):
        cm = one(m, "ConfigMap")
        k = os.path.basename(arg(container(m, "tierfs-csi"), "config"))
        text = cm["data"][k]
        if value is None:  # add a section
            cm["data"][k] = text + "\n[%s]\n%s = 1\n" % (section, key)
            return
        pat = re.compile(r"^%s\s*=.*$" % re.escape(key), re.M)
        if pat.search(text):
            cm["data"][k] = pat.sub("%s = %s" % (key, value), text, count=1)
        else:
            cm["data"][k] = text.replace("[%s]\n" % section, "[%s]\n%s = %s\n"
                                         % (section, key, value), 1)
    return mut


def set_base(key, value):
    """Set [backend] KEY = VALUE in the ConfigMap's tierfs.conf."""
    def mut(m):
        cm = one(m, "ConfigMap")
        cm["data"]["tierfs.conf"] = re.sub(r"^ca_file\s*=.*$", "%s = %s" % (key, value),
                                           cm["data"]["tierfs.conf"], flags=re.M)
    return mut


def inline_attr(key, value):
    def mut(m):
        inline_csi_volumes(m)[0][1]["csi"]["volumeAttributes"][key] = value
    return mut


def pv_csi(key, value):
    def mut(m):
        one(m, "PersistentVolume")["spec"]["csi"][key] = value
    return mut


def mutate_secret_key(m):
    sec = one(m, "Secret")
    sec["stringData"]["access_key"] = sec["stringData"].pop("accessKey")


def rename_cm_key(m):
    cm = one(m, "ConfigMap")
    cm["data"]["node.conf"] = cm["data"].pop("csi.conf")


def undeclared_mount(m):
    container(m, "tierfs-csi")["volumeMounts"].append({"name": "nonexistent", "mountPath": "/x"})


def drop_volume(name):
    def mut(m):
        spec = pod_spec(m)
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] != name]
    return mut


def pod_sc(key, value):
    def mut(m):
        for pod in pods(m):
            if any("persistentVolumeClaim" in v for v in pod["spec"]["volumes"]):
                pod["spec"]["securityContext"][key] = value
    return mut


def drop_doc_row(m):
    m["docs"] = re.sub(r"^\| `readahead` \|.*\n", "", m["docs"], flags=re.M)


def add_kind(m):
    m["files"]["extra.yaml"] = [{"apiVersion": "v1", "kind": "Service",
                                 "metadata": {"name": "x"}}]


def registrar_in_other_dir(m):
    container(m, "node-driver-registrar")["volumeMounts"][0]["name"] = "registration-dir"


CHECKS = [
    ("kinds", c_kinds, [add_kind, lambda m: one(m, "CSIDriver").update(apiVersion="v1")]),
    ("csidriver_spec", c_csidriver, [
        lambda m: one(m, "CSIDriver")["spec"].update(fsGroupPolicy="ReadWriteOnceWithFSType"),
        lambda m: one(m, "CSIDriver")["spec"].update(podInfoOnMount=False),
        lambda m: one(m, "CSIDriver")["spec"].update(attachRequired=True),
        lambda m: one(m, "CSIDriver")["spec"].update(volumeLifecycleModes=["Persistent"])]),
    ("driver_name", c_driver_name, [
        lambda m: inline_csi_volumes(m)[0][1]["csi"].update(driver="tierfs.io"),
        pv_csi("driver", "tierfs.csi.io"),
        lambda m: one(m, "CSIDriver")["metadata"].update(name="tierfs.example.com")]),
    ("registration_path", c_registration, [
        set_volume("socket-dir", ["hostPath", "path"], "/var/lib/kubelet/plugins/tierfs"),
        set_arg("node-driver-registrar", "kubelet-registration-path",
                "/var/lib/kubelet/plugins/csi.tierfs.io/other.sock"),
        set_volume("registration-dir", ["hostPath", "path"], "/var/lib/kubelet/plugins")]),
    ("endpoint_is_sidecars_address", c_endpoint, [
        set_arg("tierfs-csi", "endpoint", "unix:///csi/tierfs.sock"),
        set_arg("livenessprobe", "csi-address", "/run/csi/socket"),
        registrar_in_other_dir]),
    ("node_id", c_node_id, [
        lambda m: container(m, "tierfs-csi")["env"][0]["valueFrom"]["fieldRef"].update(
            fieldPath="status.hostIP"),
        set_arg("tierfs-csi", "node-id", "node-1")]),
    ("config_key_is_config_file", c_config, [
        rename_cm_key, set_arg("tierfs-csi", "config", "/etc/tierfs/flexvolume.conf"),
        lambda m: one(m, "ConfigMap")["data"].update({"extra.conf": "[node]\n"}),
        set_volume("config", ["configMap", "name"], "tierfs-flexvolume")]),
    ("daemon_base_config", c_daemon_conf, [
        set_conf("node", "tierfs_conf", "/var/lib/tierfs/tierfs.conf"),
        set_base("ca_file", "/etc/ssl/certs/ca-certificates.crt"),
        set_base("ca_bundle", "/opt/tierfs/current/etc/ca-certificates.crt"),
        lambda m: m.update(dockerfile=m["dockerfile"].replace(
            "/stage/opt/tierfs/current/etc/ca-", "/stage/ca-"))]),
    ("volume_mounts_declared", c_volume_mounts, [undeclared_mount, drop_volume("logs")]),
    ("privileged_bidirectional", c_privileges, [
        lambda m: container(m, "tierfs-csi")["securityContext"].update(privileged=False),
        set_mount("tierfs-csi", "kubelet-dir", "mountPropagation", "HostToContainer"),
        set_mount("tierfs-csi", "kubelet-dir", "mountPath", "/kubelet"),
        lambda m: pod_spec(m).update(hostPID=False),
        lambda m: pod_spec(m).update(hostNetwork=False)]),
    ("host_paths_at_same_path", c_same_paths, [
        set_mount("tierfs-csi", "cache", "mountPath", "/cache"),
        set_mount("tierfs-csi", "fuse", "mountPath", "/dev/fuse0"),
        set_conf("node", "daemon_log", "/var/log/tierfs-csi-daemons.log"),
        set_conf("node", "state_dir", "/run/tierfs-csi")]),
    ("liveness_port", c_liveness, [
        set_arg("livenessprobe", "health-port", "9808"),
        lambda m: container(m, "tierfs-csi")["livenessProbe"]["httpGet"].update(port="health")]),
    ("sidecar_images", c_images, [
        lambda m: container(m, "install").update(image="registry.example.com/tierfs-csi:0.0.9"),
        lambda m: container(m, "livenessprobe").update(image="quay.io/k8scsi/livenessprobe")]),
    ("install_layout", c_install_layout, [
        lambda m: container(m, "install")["env"][0].update(value="/host/opt"),
        lambda m: container(m, "tierfs-csi").update(command=["/usr/sbin/tierfs-csi"]),
        set_conf("node", "tierfs", "/usr/bin/tierfs"),
        set_mount("tierfs-csi", "opt", "mountPath", "/host/opt/tierfs"),
        lambda m: m.update(dockerfile=m["dockerfile"].replace(
            "COPY node/deploy/install-tierfs.sh /install-tierfs.sh", "")),
        lambda m: m.update(install=m["install"].replace("/install-tierfs.sh", "/common.sh")),
        lambda m: m.update(docs=m["docs"].replace("--build-arg DRIVER=csi ", ""))]),
    ("volume_attributes_known", c_volume_attributes, [
        inline_attr("cacheSize", "1G"), inline_attr("policy", 1),
        inline_attr("endpoint", "http://10.0.0.1"),
        lambda m: one(m, "PersistentVolume")["spec"]["csi"]["volumeAttributes"].update(
            bucket="training")]),
    ("secret_keys", c_secrets, [
        mutate_secret_key, lambda m: one(m, "Secret").update(type="Opaque"),
        pv_csi("nodeStageSecretRef", {"name": "datasets-s3"}),
        lambda m: inline_csi_volumes(m)[0][1]["csi"].update(
            nodePublishSecretRef={"name": "other"})]),
    ("node_config_ini", c_node_config, [
        set_conf("cache", "size", None), set_conf("node", "cache_dir", "/var/cache/x"),
        set_conf("pod", "allow", "source, cacheSize"),
        set_conf("node", "state_dir", "/run/tierfs/flexvolume"),
        set_conf("node", "tierfs", "a\n[node]\ntierfs = b")]),
    ("pv_pvc_pod_binding", c_claim, [
        lambda m: one(m, "PersistentVolumeClaim")["spec"].update(volumeName="other"),
        lambda m: one(m, "PersistentVolumeClaim")["spec"].pop("storageClassName"),
        pod_sc("runAsUser", 0), pod_sc("fsGroup", None)]),
    ("inline_volume", c_inline, [
        lambda m: inline_csi_volumes(m)[0][1]["csi"].update(volumeHandle="x"),
        lambda m: inline_csi_volumes(m)[0][1]["csi"].update(readOnly=False)]),
    ("options_documented", c_options_documented, [drop_doc_row]),
]


def run_check(fn, m):
    """fn's problems, or one naming the exception a file's shape raised."""
    try:
        return fn(m)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError,
            configparser.Error) as e:
        return ["%s: %s" % (type(e).__name__, e)]


def check_test(fn, mutations):
    """The test of one check: nothing found in the shipped files, and each
    mutation found as a problem the check reports (an exception of the
    check does not count: it would also hide a broken check)."""
    def test():
        m = load()
        problems = run_check(fn, m)
        assert not problems, "the shipped files: " + "; ".join(problems)
        for i, mut in enumerate(mutations):
            mm = copy.deepcopy(m)
            mut(mm)
            assert mm != m, "mutation %d changes nothing" % i
            try:
                found = fn(mm)
            except Exception as e:  # noqa: BLE001
                raise AssertionError("mutation %d: the check raised %r" % (i, e)) from e
            assert found, "mutation %d was not caught" % i
    return test


def t_install_sh():
    """install.sh, as the init container runs it, on a fake node: the
    version directory and the link current, file modes kept, a second run
    of the same version (a restarted pod) leaves no dot-file, and of three
    versions the newest two are kept."""
    work = tempfile.mkdtemp(prefix="tierfs-csideploy-")
    try:
        image = os.path.join(work, "image")
        for d in ("bin", "sbin", "lib"):
            os.makedirs(os.path.join(image, d))
        for rel, text in (("bin/tierfs", "#!/bin/sh\necho tierfs\n"),
                          ("sbin/tierfs-csi", "#!/bin/sh\necho tierfs-csi 0\n"),
                          ("lib/libx.so.1", "lib\n")):
            with open(os.path.join(image, rel), "w") as f:
                f.write(text)
            os.chmod(os.path.join(image, rel), 0o755 if "bin" in rel else 0o644)
        opt = os.path.join(work, "node", "opt", "tierfs")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOST_OPT": opt, "SRC": image}

        def install(version):
            with open(os.path.join(image, "VERSION"), "w") as f:
                f.write(version + "\n")
            r = subprocess.run(["sh", os.path.join(DEPLOY, "install.sh")], env=env,
                               capture_output=True, text=True, timeout=60)
            out = r.stdout + r.stderr
            assert r.returncode == 0, out
            assert "warning" not in out, out
            assert "tierfs %s in %s/current" % (version, opt) in out, out

        install("0.1.0")
        install("0.1.0")
        assert os.readlink(os.path.join(opt, "current")) == "0.1.0"
        assert sorted(os.listdir(opt)) == ["0.1.0", "current"], os.listdir(opt)
        for rel, mode in (("bin/tierfs", 0o755), ("sbin/tierfs-csi", 0o755),
                          ("lib/libx.so.1", 0o644)):
            st = os.stat(os.path.join(opt, "current", rel))
            assert stat.S_IMODE(st.st_mode) == mode, (rel, oct(st.st_mode))
        for d in ("bin", "sbin", "lib"):
            left = [n for n in os.listdir(os.path.join(opt, "0.1.0", d)) if n.startswith(".")]
            assert not left, left
        install("0.2.0")
        install("0.3.0")
        assert os.readlink(os.path.join(opt, "current")) == "0.3.0"
        assert sorted(os.listdir(opt)) == ["0.2.0", "0.3.0", "current"], os.listdir(opt)
    finally:
        shutil.rmtree(work, ignore_errors=True)


TESTS = [(name, check_test(fn, muts)) for name, fn, muts in CHECKS]
TESTS.append(("install_sh", t_install_sh))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run only these tests (comma-separated names)")
    ap.add_argument("--list", action="store_true", help="list the tests and exit")
    args = ap.parse_args()
    if args.list:
        for name, _ in TESTS:
            print(name)
        return 0
    only = set(args.only.split(",")) if args.only else None
    if only and only - {n for n, _ in TESTS}:
        print("unknown tests: %s" % ", ".join(sorted(only - {n for n, _ in TESTS})))
        return 2
    passed = failed = 0
    for name, fn in TESTS:
        if only and name not in only:
            continue
        try:
            fn()
            passed += 1
            print("ok   %s" % name)
        except Exception:  # noqa: BLE001
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
    print("csideploy: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
