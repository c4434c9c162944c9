// Drives the local Vercel Sandbox conformance server with Vercel's official
// SDK (@vercel/sandbox, pinned in package-lock.json) through every operation
// the sandboxio adapter uses. Each step prints one JSON line
// {"step": ..., ...}; referee_test.go checks them. Any mismatch exits 1.
//
// The SDK's public API has no base URL option (its API client defaults to
// https://vercel.com/api); it takes a fetch function, which is how this
// script points every request at the server, unchanged otherwise.
import { Sandbox } from "@vercel/sandbox";

const base = process.env.REFEREE_BASE_URL;
const token = process.env.REFEREE_TOKEN;
const teamId = process.env.REFEREE_TEAM;
const projectId = process.env.REFEREE_PROJECT;
const vercelAPI = "https://vercel.com/api";
const seen = [];
const toServer = (url, opts) => {
  const u = String(url);
  if (!u.startsWith(vercelAPI)) throw new Error(`unexpected URL ${u}`);
  seen.push(`${opts?.method ?? "GET"} ${new URL(u).pathname}`);
  return globalThis.fetch(base + u.slice(vercelAPI.length), opts);
};
const creds = { token, teamId, projectId, fetch: toServer };

let failed = false;
function report(step, fields) {
  console.log(JSON.stringify({ step, ...fields }));
}
function check(step, cond, what) {
  if (!cond) {
    failed = true;
    console.error(`referee: ${step}: ${what}`);
  }
}
async function errorOf(p) {
  try {
    await p;
    return null;
  } catch (e) {
    return { name: e?.constructor?.name ?? String(e), status: e?.response?.status, message: String(e?.message ?? e) };
  }
}

const sandbox = await Sandbox.create({
  ...creds,
  name: "referee-main",
  runtime: "node22",
  timeout: 120_000,
  resources: { vcpus: 1 },
  networkPolicy: "deny-all",
  tags: { "sandboxio.tenant_id": "acme", team: "agents" },
  env: { REFEREE_VAR: "from-create" },
});
report("create", { name: sandbox.name, status: sandbox.status, vcpus: sandbox.vcpus, memory: sandbox.memory, tags: sandbox.tags, networkPolicy: sandbox.networkPolicy });

{
  const r = await sandbox.runCommand({ cmd: "sh", args: ["-c", "echo out $REFEREE_VAR; echo err >&2; exit 3"] });
  report("run-exit", { exitCode: r.exitCode, stdout: await r.stdout(), stderr: await r.stderr() });
}
{
  let streamed = "";
  const sink = { write: (d) => { streamed += d; return true; } };
  const r = await sandbox.runCommand({ cmd: "sh", args: ["-c", "pwd; echo $X"], cwd: "/tmp", env: { X: "from-cmd" }, stdout: sink });
  report("run-env", { exitCode: r.exitCode, stdout: await r.stdout(), streamed });
}
{
  const start = Date.now();
  const r = await sandbox.runCommand({ cmd: "sh", args: ["-c", "echo before; sleep 30"], timeoutMs: 1000 });
  report("run-timeout", { exitCode: r.exitCode, elapsedMs: Date.now() - start, stdout: await r.stdout() });
}
{
  const cmd = await sandbox.runCommand({ cmd: "sleep", args: ["30"], detached: true });
  const running = cmd.exitCode;
  await cmd.kill("SIGKILL");
  const fin = await cmd.wait();
  report("kill-command", { before: running, exitCode: fin.exitCode });
}
{
  await sandbox.writeFiles([{ path: "/tmp/referee/sub dir/hello.txt", content: Buffer.from("hello from the referee\n"), mode: 0o640 }]);
  const r = await sandbox.runCommand({ cmd: "sh", args: ["-c", 'cat "/tmp/referee/sub dir/hello.txt"; stat -c %a "/tmp/referee/sub dir/hello.txt"'] });
  report("write", { stdout: await r.stdout() });
}
{
  const r = await sandbox.runCommand({ cmd: "ls", args: ["/sys/class/net"] });
  report("network-deny", { interfaces: (await r.stdout()).split(/\s+/).filter(Boolean) });
}
{
  const page = await Sandbox.list({ ...creds, tags: { "sandboxio.tenant_id": "acme" } });
  const names = page.sandboxes.map((s) => s.name);
  const other = await Sandbox.list({ ...creds, tags: { "sandboxio.tenant_id": "someone-else" } });
  report("list-by-tag", { found: names.includes("referee-main"), others: other.sandboxes.length });
}
{
  const got = await Sandbox.get({ ...creds, name: "referee-main" });
  report("get", { status: got.status, name: got.name });
}
{
  const stopped = await sandbox.stop();
  const got = await Sandbox.get({ ...creds, name: "referee-main" });
  report("stop", { status: stopped.status, after: got.status });
  await sandbox.delete();
  const e = await errorOf(Sandbox.get({ ...creds, name: "referee-main" }));
  report("delete", { afterStatus: e?.status ?? null });
}
{
  const short = await Sandbox.create({ ...creds, name: "referee-lifetime", runtime: "node22", timeout: 2_000, networkPolicy: "deny-all" });
  await new Promise((r) => setTimeout(r, 3_000));
  const got = await Sandbox.get({ ...creds, name: "referee-lifetime" });
  const e = await errorOf(short.runCommand({ cmd: "true" }));
  report("lifetime", { status: got.status, runFails: e !== null });
  await short.delete();
}
{
  const e = await errorOf(Sandbox.create({ ...creds, token: "wrong-token", runtime: "node22" }));
  report("bad-token", { status: e?.status ?? null });
  const e2 = await errorOf(Sandbox.create({ ...creds, teamId: "team_someone_else", runtime: "node22" }));
  report("wrong-team", { status: e2?.status ?? null });
}
{
  const e = await errorOf(Sandbox.create({ ...creds, runtime: "node22", tags: { a: "1", b: "2", c: "3", d: "4", e: "5", f: "6" } }));
  const e2 = await errorOf(Sandbox.create({ ...creds, runtime: "cobol85" }));
  const e3 = await errorOf(Sandbox.create({ ...creds, runtime: "node22", resources: { vcpus: 9 } }));
  report("refused", { tags: e?.status ?? null, runtime: e2?.status ?? null, vcpus: e3?.status ?? null });
}
{
  // The OIDC form: only VERCEL_OIDC_TOKEN, the team and project in its claims.
  const oidc = await Sandbox.create({ fetch: toServer, runtime: "python3.13", networkPolicy: { allow: ["pypi.org"], subnets: { allow: ["10.1.0.0/16"] } } });
  report("oidc", { status: oidc.status, networkPolicy: oidc.networkPolicy });
  await oidc.delete();
}
report("done", { requests: [...new Set(seen)].length });
process.exit(failed ? 1 : 0);
