//! `Dockerfile` and `deploy/k8s/` against what they run (issue 18, item 7:
//! nothing in the deployment that the tests do not exercise).
//!
//! Every manifest is parsed (the project's own YAML parser) and checked:
//! each `glassbox` container's arguments are given to the built binary with
//! `--help` appended, so clap itself accepts or refuses the subcommand, every
//! flag and every value; its `GLASSBOX_*` variables are ones that command
//! reads; etcd's flags are checked against `etcd --help`; ports, probes,
//! Services, volumes and the etcd and PostgreSQL addresses agree; the config
//! and topologies in the ConfigMaps load; no secret is written anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{glassbox, root};

/// The manifests directory.
fn k8s_dir() -> PathBuf {
    root().join("deploy/k8s")
}

/// Every manifest by file name, as JSON.
fn manifests() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(k8s_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let source = glassbox_topology::Source::new(name.clone(), text);
        let value = glassbox_topology::parse::parse(&source)
            .unwrap_or_else(|d| panic!("{name} does not parse: {d:?}"));
        out.insert(name, value.to_json());
    }
    out
}

fn kind_of(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

/// Resources of one kind, by `metadata.name`.
fn of_kind<'a>(all: &'a BTreeMap<String, Value>, kind: &str) -> BTreeMap<String, &'a Value> {
    all.values()
        .filter(|d| kind_of(d) == kind)
        .map(|d| (d["metadata"]["name"].as_str().unwrap().to_owned(), d))
        .collect()
}

/// Deployments, StatefulSets and DaemonSets.
fn workloads(all: &BTreeMap<String, Value>) -> Vec<&Value> {
    all.values()
        .filter(|d| matches!(kind_of(d), "Deployment" | "StatefulSet" | "DaemonSet"))
        .collect()
}

fn containers(workload: &Value) -> &Vec<Value> {
    workload["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap_or_else(|| panic!("no containers in {workload}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| match s {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn is_glassbox(container: &Value) -> bool {
    container["image"]
        .as_str()
        .is_some_and(|i| i.starts_with("glassbox:"))
}

/// `$(VAR)` replaced the way Kubernetes would, with a plausible value.
fn expand(arg: &str) -> String {
    arg.replace("$(POD_IP)", "10.1.2.3")
        .replace("$(NODE_NAME)", "gpu-node-a")
        .replace("$(POD_NAME)", "etcd-0")
        .replace("$(PGPASSWORD)", "pw")
}

/// The value following `flag` in an argument list.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[test]
fn every_manifest_is_listed_in_the_kustomization_and_names_itself() {
    let all = manifests();
    let kustomization = &all["kustomization.yaml"];
    assert_eq!(kind_of(kustomization), "Kustomization");
    let listed: BTreeSet<String> = strings(&kustomization["resources"]).into_iter().collect();
    let present: BTreeSet<String> = all
        .keys()
        .filter(|n| *n != "kustomization.yaml")
        .cloned()
        .collect();
    assert_eq!(listed, present, "kustomization.yaml lists every manifest");
    for (file, doc) in &all {
        assert!(doc["apiVersion"].is_string(), "{file}: apiVersion");
        assert!(doc["metadata"]["name"].is_string() || file == "kustomization.yaml");
    }
}

#[test]
fn glassbox_containers_run_real_subcommands_with_flags_the_cli_accepts() {
    let all = manifests();
    let mut seen = BTreeSet::new();
    for w in workloads(&all) {
        for c in containers(w).iter().filter(|c| is_glassbox(c)) {
            assert!(
                c["command"].is_null(),
                "the image's entrypoint is `glassbox`"
            );
            let args: Vec<String> = strings(&c["args"]).iter().map(|a| expand(a)).collect();
            let sub = args.first().expect("a subcommand").clone();
            seen.insert(sub.clone());
            // clap parses every flag and value before it answers --help.
            let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
            argv.push("--help");
            let out = glassbox(&argv, None);
            let help = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "`glassbox {}` is refused by the CLI:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                help.contains(&format!("Usage: glassbox {sub}")),
                "not the help of `{sub}`:\n{help}"
            );
            // The GLASSBOX_* variables it is given are ones that command reads.
            for e in c["env"].as_array().into_iter().flatten() {
                let name = e["name"].as_str().unwrap();
                if name.starts_with("GLASSBOX_") {
                    assert!(
                        help.contains(name),
                        "`glassbox {sub}` does not read `{name}`:\n{help}"
                    );
                }
            }
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["serve".to_owned(), "worker".to_owned()]),
        "a coordinator and a worker"
    );
    // The coordinator joins the cluster; the worker says where it is reached.
    let coord = containers(of_kind(&all, "Deployment")["glassbox-coordinator"])[0].clone();
    assert!(strings(&coord["args"]).contains(&"--cluster".to_owned()));
    let worker = containers(of_kind(&all, "DaemonSet")["glassbox-worker"])[0].clone();
    let wargs = strings(&worker["args"]);
    assert!(wargs.contains(&"--etcd".to_owned()) && wargs.contains(&"--advertise".to_owned()));
}

#[test]
fn etcd_runs_three_members_with_flags_etcd_accepts_and_the_clients_list_them() {
    let all = manifests();
    let sts = of_kind(&all, "StatefulSet")["etcd"];
    let replicas = sts["spec"]["replicas"].as_u64().unwrap();
    assert_eq!(replicas, 3);
    let svc = of_kind(&all, "Service")["etcd"];
    assert_eq!(svc["spec"]["clusterIP"], "None", "headless");
    assert_eq!(sts["spec"]["serviceName"], "etcd");
    let c = &containers(sts)[0];
    let command = strings(&c["command"]);
    assert_eq!(command[0], "etcd");
    let help = Command::new("etcd")
        .arg("--help")
        .output()
        .unwrap_or_else(|e| {
            panic!("`etcd` is needed to check the manifests' flags ({e}); run scripts/install-deps.sh (Debian: etcd-server)")
        });
    let help = format!(
        "{}{}",
        String::from_utf8_lossy(&help.stdout),
        String::from_utf8_lossy(&help.stderr)
    );
    for flag in &command[1..] {
        let name = flag.split('=').next().unwrap();
        assert!(
            help.contains(&format!("{name} ")) || help.contains(&format!("{name}\n")),
            "etcd has no flag `{name}`"
        );
    }
    let initial = command
        .iter()
        .find_map(|f| f.strip_prefix("--initial-cluster="))
        .expect("--initial-cluster");
    let members: Vec<String> = (0..replicas)
        .map(|i| format!("etcd-{i}=http://etcd-{i}.etcd:2380"))
        .collect();
    assert_eq!(initial, members.join(","));
    // Every glassbox process lists every member's client URL.
    let want: Vec<String> = (0..replicas)
        .map(|i| format!("https://etcd-{i}.etcd:2379"))
        .collect();
    for w in workloads(&all) {
        for c in containers(w).iter().filter(|c| is_glassbox(c)) {
            let args = strings(&c["args"]);
            let urls = flag_value(&args, "--cluster")
                .or_else(|| flag_value(&args, "--etcd"))
                .expect("etcd URLs");
            assert_eq!(urls, want.join(","));
        }
    }
    let ports: BTreeSet<u64> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["port"].as_u64().unwrap())
        .collect();
    assert_eq!(ports, BTreeSet::from([2379, 2380]));
}

/// A container's ports by name, and the set of numbers.
fn container_ports(c: &Value) -> BTreeMap<String, u64> {
    c["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_owned(),
                p["containerPort"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn resolves(port: &Value, ports: &BTreeMap<String, u64>) -> bool {
    match port {
        Value::String(name) => ports.contains_key(name),
        Value::Number(n) => ports.values().any(|p| Some(*p) == n.as_u64()),
        _ => false,
    }
}

#[test]
fn ports_probes_and_services_agree() {
    let all = manifests();
    let openapi = glassbox_server::openapi::json();
    for w in workloads(&all) {
        let name = w["metadata"]["name"].as_str().unwrap();
        let selector = &w["spec"]["selector"]["matchLabels"];
        let labels = &w["spec"]["template"]["metadata"]["labels"];
        for (k, v) in selector.as_object().unwrap() {
            assert_eq!(&labels[k], v, "{name}: the selector matches its pods");
        }
        for c in containers(w) {
            let ports = container_ports(c);
            assert!(!ports.is_empty(), "{name}: declares its ports");
            for probe in ["readinessProbe", "livenessProbe"] {
                let p = &c[probe];
                assert!(!p.is_null(), "{name}: has a {probe}");
                for how in ["httpGet", "tcpSocket"] {
                    if !p[how].is_null() {
                        assert!(resolves(&p[how]["port"], &ports), "{name} {probe}");
                    }
                }
                if is_glassbox(c) {
                    // The server's real health endpoints.
                    let path = p["httpGet"]["path"].as_str().expect("an HTTP probe");
                    assert!(
                        ["/healthz", "/readyz"].contains(&path)
                            && openapi.contains(&format!("\"{path}\"")),
                        "{name} {probe}: {path}"
                    );
                }
            }
            if is_glassbox(c) {
                let args = strings(&c["args"]);
                let port: u64 = flag_value(&args, "--port").unwrap().parse().unwrap();
                assert_eq!(
                    ports.values().copied().collect::<Vec<_>>(),
                    [port],
                    "{name}"
                );
                if let Some(url) = flag_value(&args, "--advertise") {
                    assert!(url.ends_with(&format!(":{port}")), "{name}: {url}");
                }
                let ann = &w["spec"]["template"]["metadata"]["annotations"];
                assert_eq!(ann["prometheus.io/port"], port.to_string(), "{name}");
            }
        }
    }
    // Each Service selects pods of a workload and targets ports they have.
    for (name, svc) in of_kind(&all, "Service") {
        let selector = svc["spec"]["selector"].as_object().unwrap();
        let backing: Vec<&Value> = workloads(&all)
            .into_iter()
            .filter(|w| {
                let labels = &w["spec"]["template"]["metadata"]["labels"];
                selector.iter().all(|(k, v)| &labels[k] == v)
            })
            .collect();
        assert_eq!(backing.len(), 1, "Service {name} selects one workload");
        let ports: BTreeMap<String, u64> = containers(backing[0])
            .iter()
            .flat_map(container_ports)
            .collect();
        for p in svc["spec"]["ports"].as_array().unwrap() {
            assert!(resolves(&p["targetPort"], &ports), "Service {name}: {p}");
        }
    }
    // The coordinators' store is the PostgreSQL Service, on its port.
    let coord = containers(of_kind(&all, "Deployment")["glassbox-coordinator"])[0].clone();
    let store = coord["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "GLASSBOX_STORE")
        .and_then(|e| e["value"].as_str())
        .expect("GLASSBOX_STORE")
        .to_owned();
    let pg = of_kind(&all, "Service")["postgres"];
    let pg_port = pg["spec"]["ports"][0]["port"].as_u64().unwrap();
    assert!(
        store.contains(&format!("@postgres:{pg_port}/")),
        "store URL {store} names the postgres Service"
    );
    let db = &containers(of_kind(&all, "StatefulSet")["postgres"])[0];
    let db_env = |n: &str| {
        db["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .and_then(|e| e["value"].as_str())
            .unwrap()
            .to_owned()
    };
    let (user, name) = (db_env("POSTGRES_USER"), db_env("POSTGRES_DB"));
    assert!(
        store.starts_with(&format!("postgres://{user}:")) && store.ends_with(&format!("/{name}")),
        "{store}"
    );
}

#[test]
fn no_secret_is_written_in_a_manifest() {
    let all = manifests();
    assert!(
        of_kind(&all, "Secret").is_empty(),
        "Secrets are created by hand (docs/cluster.md), never committed"
    );
    let sensitive = ["PASSWORD", "SECRET", "TOKEN", "KEY"];
    let cluster_md = std::fs::read_to_string(root().join("docs/cluster.md")).unwrap();
    let mut from_secrets = BTreeSet::new();
    for w in workloads(&all) {
        for c in containers(w) {
            for e in c["env"].as_array().into_iter().flatten() {
                let name = e["name"].as_str().unwrap();
                if sensitive.iter().any(|s| name.contains(s)) {
                    let secret = &e["valueFrom"]["secretKeyRef"];
                    assert!(
                        e["value"].is_null() && secret["name"].is_string(),
                        "`{name}` must come from a Secret: {e}"
                    );
                    let secret = secret["name"].as_str().unwrap();
                    assert!(
                        cluster_md.contains(&format!("create secret generic {secret}")),
                        "docs/cluster.md says how to create the Secret `{secret}`"
                    );
                    from_secrets.insert(name.to_owned());
                }
            }
        }
    }
    assert!(!from_secrets.is_empty());
    // A password inside a URL is always a variable taken from a Secret.
    let userinfo = regex::Regex::new(r"://[^/@\s:]+:([^/@\s]+)@").unwrap();
    for (file, doc) in &all {
        let text = doc.to_string();
        for m in userinfo.captures_iter(&text) {
            let pass = &m[1];
            let var = pass
                .strip_prefix("$(")
                .and_then(|p| p.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{file}: a literal password in a URL"));
            assert!(
                from_secrets.contains(var),
                "{file}: `{var}` is not from a Secret"
            );
        }
    }
}

/// The mounted file or directory `path` of a glassbox container, as the
/// ConfigMap behind it.
fn config_map_at<'a>(all: &'a BTreeMap<String, Value>, w: &Value, path: &Path) -> &'a Value {
    let c = containers(w).iter().find(|c| is_glassbox(c)).unwrap();
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("nothing mounted at {}", path.display()));
    let volume = w["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let map = volume["configMap"]["name"].as_str().unwrap();
    of_kind(all, "ConfigMap")[map]
}

#[test]
fn the_mounted_config_and_topologies_load() {
    let all = manifests();
    let tmp = tempfile::tempdir().unwrap();
    for w in workloads(&all) {
        let Some(c) = containers(w).iter().find(|c| is_glassbox(c)) else {
            continue;
        };
        let args = strings(&c["args"]);
        let config = PathBuf::from(flag_value(&args, "--config").expect("--config"));
        let map = config_map_at(&all, w, &config);
        let key = config.file_name().unwrap().to_str().unwrap();
        let text = map["data"][key]
            .as_str()
            .expect("the config file in its ConfigMap");
        let parsed = glassbox_server::Config::parse(text)
            .unwrap_or_else(|e| panic!("{key} in the ConfigMap: {e}"));
        assert!(
            parsed.keys.is_empty(),
            "keys come from the Secret, not the file"
        );
        if let Some(dir) = flag_value(&args, "--topologies") {
            let map = config_map_at(&all, w, Path::new(dir));
            let files = map["data"].as_object().unwrap();
            assert!(!files.is_empty());
            for (name, text) in files {
                let path = tmp.path().join(name);
                std::fs::write(&path, text.as_str().unwrap()).unwrap();
                let out = glassbox(&["validate", path.to_str().unwrap()], None);
                assert!(
                    out.status.success(),
                    "topology `{name}` in the ConfigMap:\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

#[test]
fn workers_ask_for_a_gpu_on_gpu_nodes() {
    let all = manifests();
    let ds = of_kind(&all, "DaemonSet")["glassbox-worker"];
    let spec = &ds["spec"]["template"]["spec"];
    assert!(
        !spec["nodeSelector"].as_object().unwrap().is_empty(),
        "a node selector"
    );
    let c = &containers(ds)[0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 1);
}

#[test]
fn the_dockerfile_builds_with_the_project_scripts_and_runs_as_a_user() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !code.contains("target-cpu=native"),
        "the image must run on any x86-64 node (ADR 0004)"
    );
    // Scripts it runs exist and are executable.
    let script = regex::Regex::new(r"\./(scripts/[\w.-]+)").unwrap();
    let scripts: Vec<String> = script
        .captures_iter(&text)
        .map(|m| m[1].to_owned())
        .collect();
    assert!(
        scripts.contains(&"scripts/package.sh".to_owned()),
        "{scripts:?}"
    );
    for s in &scripts {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root().join(s))
            .unwrap()
            .permissions()
            .mode();
        assert!(mode & 0o111 != 0, "{s} is executable");
    }
    // The glassbox commands it runs are accepted by the CLI.
    let runs = regex::Regex::new(r"/opt/glassbox/glassbox ([a-z][^;&|\n]*)").unwrap();
    let mut ran = 0;
    for m in runs.captures_iter(&text) {
        let mut argv: Vec<&str> = m[1].split_whitespace().collect();
        argv.push("--help");
        let out = glassbox(&argv, None);
        assert!(
            out.status.success(),
            "`glassbox {}` in the Dockerfile:\n{}",
            &m[1],
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(
        ran >= 1,
        "the models are fetched with `glassbox models fetch`"
    );
    let directives: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with(' '))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let user = directives
        .iter()
        .rev()
        .find(|(d, _)| *d == "USER")
        .map(|(_, u)| *u)
        .expect("a USER");
    assert!(
        !user.starts_with("root") && !user.starts_with("0"),
        "USER {user}"
    );
    let entry = directives
        .iter()
        .find(|(d, _)| *d == "ENTRYPOINT")
        .unwrap()
        .1;
    assert_eq!(entry, r#"["glassbox"]"#);
    // The ports it exposes are the ones the manifests' containers use, and
    // the tag it documents is the image the manifests run.
    let exposed: BTreeSet<u64> = directives
        .iter()
        .filter(|(d, _)| *d == "EXPOSE")
        .flat_map(|(_, p)| p.split_whitespace().map(|p| p.parse::<u64>().unwrap()))
        .collect();
    let all = manifests();
    let mut used = BTreeSet::new();
    for w in workloads(&all) {
        for c in containers(w).iter().filter(|c| is_glassbox(c)) {
            used.extend(container_ports(c).into_values());
            let image = c["image"].as_str().unwrap();
            assert!(text.contains(&format!("-t {image} .")), "{image}");
        }
    }
    assert_eq!(exposed, used);
}
