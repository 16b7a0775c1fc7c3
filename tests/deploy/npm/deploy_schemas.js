#!/usr/bin/env node
// Schema checks for deploy/ that need npm packages (scripts/check_deploy.sh --npm-dir DIR runs
// them; DIR holds node_modules installed from package.json + package-lock.json beside this file).
//
//   node deploy_schemas.js --modules DIR render KUSTOMIZE_DIR             rendered objects, JSON
//   node deploy_schemas.js --modules DIR k8s KUSTOMIZE_DIR CMAKELISTS     render + validate
//   node deploy_schemas.js --modules DIR compare KUSTOMIZE_DIR RENDERED.yaml
//   node deploy_schemas.js --modules DIR grafana RULES_OUT DASHBOARD.json...
//
// render: a small kustomize for exactly the fields deploy/kubernetes/kustomization.yaml uses
//   (namespace, labels without selectors/templates, resources, secretGenerator with files and its
//   content-hash suffix plus the pod specs' references to it, images newName/newTag). Any other
//   field is refused, so the renderer never silently differs from kustomize. `compare` checks it
//   against kustomize's own output (kubectl kustomize) where one is installed.
// k8s: every object is validated with kubernetes-models (the Kubernetes OpenAPI schemas: types,
//   formats, required fields), then type-checked by TypeScript against kubernetes-models' API
//   types, which rejects unknown fields as the API server's strict field validation does. Then
//   policy: requests and limits on every container, a PodDisruptionBudget covering every worker
//   workload, images tagged with the project version from CMakeLists.txt.
// grafana: every dashboard is validated against the JSON schema generated from @grafana/schema's
//   Dashboard type; every panel query (PromQL, template variables substituted) is written to
//   RULES_OUT as a Prometheus rules file for `promtool check rules`.
// Every problem is printed as "FILE: KIND/NAME: message" (or "FILE: path: message"); exit 1.
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const childProcess = require('child_process');
const {createRequire} = require('module');

let modulesDir = null;
let need = null;  // require() from the npm folder
const problems = [];
const problem = (msg) => problems.push(msg);

// ---------------------------------------------------------------- YAML
function parseYamlStream(file) {
  const YAML = need('yaml');
  // YAML 1.1, as kustomize (go-yaml) reads it: `defaultMode: 0400` is octal (256).
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'), {version: '1.1'});
  const out = [];
  for (const doc of docs) {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0].message}`);
    const obj = doc.toJS();
    if (obj !== null && obj !== undefined) out.push(obj);
  }
  return out;
}

// ---------------------------------------------------------------- renderer
const CLUSTER_SCOPED = new Set([
  'Namespace', 'Node', 'PersistentVolume', 'StorageClass', 'ClusterRole', 'ClusterRoleBinding',
  'CustomResourceDefinition', 'PriorityClass', 'RuntimeClass', 'IngressClass',
  'ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration', 'CSIDriver',
  'APIService',
]);
const KUSTOMIZATION_FIELDS =
    new Set(['apiVersion', 'kind', 'namespace', 'labels', 'resources', 'secretGenerator', 'images']);

// kustomize's hash suffix: sha256 of the JSON of {data, kind, name, type} (Go's encoding: keys
// sorted, no spaces), first 10 hex digits with 0,1,3,a,e replaced so it never looks like a
// number or a word. kustomize 5 (kubectl >= 1.27) hashes the generated Secret before naming
// it, so `name` is empty (kustomize 2, in kubectl 1.20, hashed the name too).
function secretHash(type, data) {
  const name = '';
  const sorted = {};
  for (const k of Object.keys(data).sort()) sorted[k] = data[k];
  const json = JSON.stringify({data: sorted, kind: 'Secret', name, type})
                   .replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
  const hex = crypto.createHash('sha256').update(json).digest('hex').slice(0, 10);
  const map = {'0': 'g', '1': 'h', '3': 'k', 'a': 'm', 'e': 't'};
  return hex.replace(/[013ae]/g, (c) => map[c]);
}

// A secretGenerator value as kustomize (kyaml) encodes it: base64, and once that is 70 characters
// or longer, cut into lines of 70, each ending in a newline. The hash covers this text.
function kustomizeBase64(buffer) {
  const text = buffer.toString('base64');
  if (text.length < 70) return text;
  return text.match(/.{1,70}/g).map((line) => line + '\n').join('');
}

// The pod specs inside a workload (Pod, templates, CronJob's job template).
function podSpecs(obj) {
  const s = obj.spec || {};
  if (obj.kind === 'Pod') return [s];
  if (obj.kind === 'CronJob') return [(((s.jobTemplate || {}).spec || {}).template || {}).spec].filter(Boolean);
  return s.template && s.template.spec ? [s.template.spec] : [];
}
function containersOf(spec) {
  return [...(spec.initContainers || []), ...(spec.containers || [])];
}

function renderKustomization(dir) {
  const kfile = path.join(dir, 'kustomization.yaml');
  const [k] = parseYamlStream(kfile);
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_FIELDS.has(key)) {
      throw new Error(`kustomization.yaml: field '${key}' is not implemented by this renderer ` +
                      `(tests/deploy/npm/deploy_schemas.js); implement it faithfully or avoid it`);
    }
  }
  const objects = [];  // {obj, file}
  for (const res of k.resources || []) {
    const file = path.join(dir, res);
    if (fs.statSync(file).isDirectory()) throw new Error(`kustomization.yaml: resource '${res}' is a folder (not implemented)`);
    for (const obj of parseYamlStream(file)) objects.push({obj, file: path.relative(dir, file)});
  }
  // secretGenerator
  const renamed = {};
  for (const gen of k.secretGenerator || []) {
    for (const key of Object.keys(gen)) {
      if (!['name', 'files', 'literals', 'type'].includes(key)) {
        throw new Error(`kustomization.yaml: secretGenerator '${gen.name}': field '${key}' is not implemented`);
      }
    }
    const type = gen.type || 'Opaque';
    const data = {};
    for (const entry of gen.files || []) {
      const eq = entry.indexOf('=');
      const key = eq >= 0 ? entry.slice(0, eq) : path.basename(entry);
      const src = path.join(dir, eq >= 0 ? entry.slice(eq + 1) : entry);
      if (!fs.existsSync(src)) throw new Error(`kustomization.yaml: secretGenerator '${gen.name}': file ${path.relative(dir, src)} does not exist`);
      data[key] = kustomizeBase64(fs.readFileSync(src));
    }
    for (const lit of gen.literals || []) {
      const eq = lit.indexOf('=');
      data[lit.slice(0, eq)] = kustomizeBase64(Buffer.from(lit.slice(eq + 1)));
    }
    const name = `${gen.name}-${secretHash(type, data)}`;
    renamed[gen.name] = name;
    objects.push({obj: {apiVersion: 'v1', kind: 'Secret', metadata: {name}, type, data},
                  file: 'kustomization.yaml (secretGenerator)'});
  }
  // namespace
  if (k.namespace) {
    for (const {obj, file} of objects) {
      if (obj.kind === 'Namespace') {
        if (obj.metadata.name !== k.namespace) {
          throw new Error(`${file}: Namespace '${obj.metadata.name}' differs from the kustomization's namespace '${k.namespace}' (not implemented)`);
        }
        continue;
      }
      if (!CLUSTER_SCOPED.has(obj.kind)) obj.metadata.namespace = k.namespace;
    }
  }
  // labels (metadata only)
  for (const entry of k.labels || []) {
    for (const key of Object.keys(entry)) {
      if (key !== 'pairs' && !(['includeSelectors', 'includeTemplates'].includes(key) && entry[key] === false)) {
        throw new Error(`kustomization.yaml: labels: '${key}: ${entry[key]}' is not implemented (only pairs on metadata.labels)`);
      }
    }
    for (const {obj} of objects) obj.metadata.labels = {...(obj.metadata.labels || {}), ...entry.pairs};
  }
  // references to generated Secrets, and images
  const images = {};
  for (const img of k.images || []) {
    for (const key of Object.keys(img)) {
      if (!['name', 'newName', 'newTag'].includes(key)) throw new Error(`kustomization.yaml: images '${img.name}': field '${key}' is not implemented`);
    }
    images[img.name] = img;
  }
  const rename = (holder, field) => {
    if (holder && renamed[holder[field]]) holder[field] = renamed[holder[field]];
  };
  for (const {obj, file} of objects) {
    for (const spec of podSpecs(obj)) {
      for (const v of spec.volumes || []) {
        rename(v.secret, 'secretName');
        for (const src of (v.projected || {}).sources || []) rename(src.secret, 'name');
      }
      for (const ref of spec.imagePullSecrets || []) rename(ref, 'name');
      for (const c of containersOf(spec)) {
        for (const e of c.env || []) rename((e.valueFrom || {}).secretKeyRef, 'name');
        for (const e of c.envFrom || []) rename(e.secretRef, 'name');
        if (!c.image) continue;
        const m = /^(.*?)(?::([^:/@]+))?(@.+)?$/.exec(c.image);
        const img = images[m[1]];
        if (!img) continue;
        if (m[3]) throw new Error(`${file}: ${obj.kind}/${obj.metadata.name}: image ${c.image} has a digest (not implemented)`);
        c.image = `${img.newName || m[1]}${(img.newTag || m[2]) ? ':' + (img.newTag || m[2]) : ''}`;
      }
    }
  }
  return objects;
}

// ---------------------------------------------------------------- Kubernetes validation
const id = ({obj, file}) => `${file}: ${obj.kind}/${(obj.metadata || {}).name}`;
function modelPath(obj) {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : [null, obj.apiVersion];
  return group ? `kubernetes-models/${group}/${version}/${obj.kind}` : `kubernetes-models/${version}/${obj.kind}`;
}

function validateK8s(objects) {
  for (const o of objects) {
    let Model;
    try {
      Model = need(modelPath(o.obj))[o.obj.kind];
    } catch (e) {
      problem(`${id(o)}: no schema for apiVersion ${o.obj.apiVersion} kind ${o.obj.kind}`);
      continue;
    }
    // A Secret's values may hold the newlines kustomize wraps base64 with: the API server's
    // decoder (Go's encoding/base64) skips them, the schema's "byte" format does not.
    const obj = o.obj.kind === 'Secret' && o.obj.data ? {
      ...o.obj,
      data: Object.fromEntries(
          Object.entries(o.obj.data).map(([k, v]) => [k, String(v).replace(/\n/g, '')])),
    } : o.obj;
    try {
      new Model(obj).validate();
    } catch (e) {
      problem(`${id(o)}: ${e.message.split('\n').join('; ')}`);
    }
  }
  strictFields(objects);
}

// The API types as TypeScript, with excess-property checks: an unknown field anywhere is an
// error, like `kubectl apply --validate=strict` (the server's strict field validation).
function strictFields(objects) {
  const work = fs.mkdtempSync(path.join(modulesDir, 'tscheck-'));
  try {
    const lines = [];
    const ranges = [];
    objects.forEach((o, i) => {
      let mod;
      try { need.resolve(modelPath(o.obj)); mod = modelPath(o.obj); } catch (e) { return; }
      const iface = `I${o.obj.kind}`;
      lines.push(`import type { ${iface} as T${i} } from "${mod}";`);
    });
    objects.forEach((o, i) => {
      if (!lines.some((l) => l.includes(` as T${i} `))) return;
      const start = lines.length + 1;
      const body = JSON.stringify(o.obj, null, 1).split('\n');
      lines.push(`export const o${i}: T${i} = ${body[0]}`, ...body.slice(1));
      ranges.push({start, end: lines.length, o});
    });
    fs.writeFileSync(path.join(work, 'objects.ts'), lines.join('\n') + '\n');
    const tsc = path.join(modulesDir, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = childProcess.spawnSync(process.execPath, [tsc, '--noEmit', '--strict', '--skipLibCheck',
      '--moduleResolution', 'node', '--module', 'commonjs', '--target', 'es2020', 'objects.ts'],
      {cwd: work, encoding: 'utf8'});
    if (r.status === 0) return;
    const out = (r.stdout || '') + (r.stderr || '');
    let matched = 0;
    for (const line of out.split('\n')) {
      const m = /^objects\.ts\((\d+),\d+\): error (TS\d+: .*)$/.exec(line);
      if (!m) continue;
      const range = ranges.find((x) => +m[1] >= x.start && +m[1] <= x.end);
      const field = range ? fieldAt(lines, range.start, +m[1]) : '';
      problem(`${range ? id(range.o) : 'objects.ts'}: ${field ? field + ': ' : ''}${m[2]}`);
      matched++;
    }
    if (!matched) problem(`TypeScript check failed: ${out.trim()}`);
  } finally {
    fs.rmSync(work, {recursive: true, force: true});
  }
}
// The JSON path of the line `at` in an object printed by JSON.stringify(_, null, 1).
function fieldAt(lines, start, at) {
  const stack = [];
  for (let n = start; n <= at; n++) {
    const line = lines[n - 1];
    const depth = line.length - line.trimStart().length;
    const key = /^\s*"([^"]+)":/.exec(line);
    stack.length = depth;
    if (key) stack[depth] = key[1];
  }
  return stack.filter(Boolean).join('.');
}

function checkPolicy(objects, cmakeLists) {
  const version = (/project\(\s*\w+\s+VERSION\s+([0-9][0-9.]*)/.exec(fs.readFileSync(cmakeLists, 'utf8')) || [])[1];
  if (!version) problem(`${cmakeLists}: no project(NAME VERSION x.y.z)`);
  const workloads = objects.filter((o) => podSpecs(o.obj).length);
  for (const o of workloads) {
    for (const spec of podSpecs(o.obj)) {
      for (const c of containersOf(spec)) {
        const r = c.resources || {};
        for (const kind of ['requests', 'limits']) {
          for (const res of ['cpu', 'memory']) {
            if (!(r[kind] || {})[res]) problem(`${id(o)}: container '${c.name}' has no resources.${kind}.${res}`);
          }
        }
        if (version && c.image && !c.image.endsWith(`:${version}`)) {
          problem(`${id(o)}: container '${c.name}' image ${c.image} is not tagged with the project version ${version} (CMakeLists.txt; kustomization.yaml images: newTag)`);
        }
      }
    }
  }
  // Every worker workload (more than one pod, or a DaemonSet) is covered by a PodDisruptionBudget.
  const pdbs = objects.filter((o) => o.obj.kind === 'PodDisruptionBudget');
  const matches = (sel, labels) => Object.entries((sel || {}).matchLabels || {}).every(([k, v]) => labels[k] === v) &&
      !((sel || {}).matchExpressions || []).length;
  for (const o of workloads) {
    if (!/worker/.test(o.obj.metadata.name)) continue;
    const labels = ((o.obj.spec.template || {}).metadata || {}).labels || {};
    const covering = pdbs.filter((p) => p.obj.metadata.namespace === o.obj.metadata.namespace &&
                                        matches(p.obj.spec.selector, labels));
    if (covering.length !== 1) {
      problem(`${id(o)}: ${covering.length} PodDisruptionBudget(s) select its pods (want exactly one)`);
    }
  }
}

// kustomize's own output (a YAML stream) equals ours, object by object.
function compare(objects, renderedFile) {
  const theirs = parseYamlStream(renderedFile);
  const key = (obj) => `${obj.kind}/${obj.metadata.namespace || ''}/${obj.metadata.name}`;
  const ours = new Map(objects.map((o) => [key(o.obj), o]));
  const canon = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x))
      ? Object.fromEntries(Object.keys(x).sort().map((kk) => [kk, x[kk]])) : x);
  for (const obj of theirs) {
    const o = ours.get(key(obj));
    if (!o) { problem(`kustomize renders ${key(obj)}, this renderer does not`); continue; }
    ours.delete(key(obj));
    if (canon(o.obj) !== canon(obj)) problem(`${id(o)}: differs from kustomize's rendering:\n  ours:   ${canon(o.obj)}\n  theirs: ${canon(obj)}`);
  }
  for (const k of ours.keys()) problem(`this renderer renders ${k}, kustomize does not`);
}

// ---------------------------------------------------------------- Grafana
function dashboardSchema() {
  const cache = path.join(modulesDir, 'grafana-dashboard.schema.json');
  if (fs.existsSync(cache)) return JSON.parse(fs.readFileSync(cache, 'utf8'));
  const tsj = need('ts-json-schema-generator');
  const types = need.resolve('@grafana/schema/package.json').replace(/package\.json$/, 'dist/types/raw/dashboard/x/types.gen.d.ts');
  const schema = tsj.createGenerator({path: types, type: 'Dashboard', skipTypeCheck: true,
                                      additionalProperties: false, expose: 'export'}).createSchema('Dashboard');
  fs.writeFileSync(`${cache}.${process.pid}`, JSON.stringify(schema));
  fs.renameSync(`${cache}.${process.pid}`, cache);  // atomic: parallel checks share the cache
  return schema;
}

// A stand-in value for each Grafana variable, so that the query parses as PromQL.
function substituteVariables(expr, variables) {
  const builtin = {__rate_interval: '5m', __interval: '1m', __range: '1h', __interval_ms: '60000',
                   __range_ms: '3600000', __range_s: '3600', __auto: '1m'};
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)/g, (all, a, b, c) => {
    const name = a || b || c;
    if (builtin[name]) return builtin[name];
    if (variables.has(name)) return variables.get(name);
    return all;  // left alone: promtool reports it
  });
}

function checkGrafana(rulesOut, files) {
  const Ajv = need('ajv');
  const validate = new Ajv({allErrors: true, strict: false}).compile(dashboardSchema());
  const groups = [];
  for (const file of files) {
    let dash;
    try { dash = JSON.parse(fs.readFileSync(file, 'utf8')); } catch (e) { problem(`${file}: ${e.message}`); continue; }
    if (!validate(dash)) {
      for (const err of validate.errors) {
        const panel = /^\/panels\/(\d+)/.exec(err.instancePath);
        const title = panel ? ` (panel "${(dash.panels[+panel[1]] || {}).title}")` : '';
        problem(`${file}: ${err.instancePath || '/'}${title}: ${err.message}${err.params && err.params.additionalProperty ? ` '${err.params.additionalProperty}'` : ''}`);
      }
    }
    const variables = new Map(((dash.templating || {}).list || []).map((v) => [v.name, v.allValue || 'placeholder']));
    const rules = [];
    const walk = (panels) => {
      for (const p of panels || []) {
        for (const t of p.targets || []) {
          if (typeof t.expr !== 'string') continue;
          rules.push({record: `panel_${p.id}_${t.refId || 'A'}`,
                      expr: substituteVariables(t.expr, variables),
                      labels: {panel: String(p.title || p.id), file: path.basename(file)}});
        }
        walk(p.panels);
      }
    };
    walk(dash.panels);
    groups.push({name: path.basename(file), rules});
  }
  // JSON is YAML: promtool reads it as a rules file.
  fs.writeFileSync(rulesOut, JSON.stringify({groups}, null, 1));
}

// ---------------------------------------------------------------- main
function main(argv) {
  if (argv[0] !== '--modules') throw new Error('usage: deploy_schemas.js --modules DIR COMMAND ...');
  modulesDir = path.resolve(argv[1]);
  need = createRequire(path.join(modulesDir, 'package.json'));
  const [cmd, ...args] = argv.slice(2);
  if (cmd === 'render') {
    process.stdout.write(JSON.stringify(renderKustomization(args[0]).map((o) => o.obj), null, 1) + '\n');
  } else if (cmd === 'k8s') {
    const objects = renderKustomization(args[0]);
    validateK8s(objects);
    checkPolicy(objects, args[1]);
    if (!problems.length) console.log(`${objects.length} objects valid`);
  } else if (cmd === 'compare') {
    compare(renderKustomization(args[0]), args[1]);
  } else if (cmd === 'grafana') {
    checkGrafana(args[0], args.slice(1));
  } else {
    throw new Error(`unknown command '${cmd}'`);
  }
  for (const p of problems) console.log(p);
  return problems.length ? 1 : 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  console.log(e.message);
  process.exitCode = 1;
}
