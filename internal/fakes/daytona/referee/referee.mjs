// Drives the local Daytona conformance server with Daytona's official SDK
// (@daytonaio/sdk, pinned in package-lock.json) through every operation the
// sandboxio adapter uses. Each step prints one JSON line; any mismatch
// throws and the script exits non-zero. referee_test.go runs it with
// DAYTONA_API_URL pointing at the server.
import { Daytona, DaytonaNotFoundError, DaytonaAuthenticationError } from '@daytonaio/sdk'

const snapshot = process.env.REFEREE_SNAPSHOT
const report = (step, fields) => console.log(JSON.stringify({ step, ...fields }))
const fail = (msg) => { throw new Error(msg) }
const errName = async (p) => { try { await p; return 'none' } catch (e) { return e.constructor.name } }

const daytona = new Daytona() // DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET from the environment

// create, as the adapter creates: the image as a declarative build (the
// SDK sends buildInfo "FROM <image>"), labels, env, caps in whole GB, every
// egress blocked, the lifetime as the idle limit, deleted on stop.
const sb = await daytona.create({
  image: snapshot,
  labels: { 'sandboxio.tenant_id': 'acme', 'needs encoding': 'a&b=c %' },
  envVars: { REFEREE_VAR: 'from-create' },
  resources: { cpu: 1, memory: 1, disk: 1 },
  networkBlockAll: true,
  autoStopInterval: 5,
  autoDeleteInterval: 0,
}, { timeout: 120 })
if (sb.state !== 'started') fail(`state after create: ${sb.state}`)
report('create', { sandboxId: sb.id, state: sb.state, toolbox: sb.toolboxProxyUrl })

await sb.process.createSession('s1')
const r1 = await sb.process.executeSessionCommand('s1', { command: 'echo out-from-session; echo err >&2; exit 3' })
report('run-exit', { exitCode: r1.exitCode, stdout: r1.stdout, stderr: r1.stderr })
const r2 = await sb.process.executeSessionCommand('s1', { command: 'printf %s "$REFEREE_VAR"' })
report('run-env', { exitCode: r2.exitCode, stdout: r2.stdout })

await sb.fs.uploadFile(Buffer.from('hello from the referee\n'), '/tmp/referee/hello.txt')
await sb.fs.setFilePermissions('/tmp/referee/hello.txt', { mode: '750' })
const r3 = await sb.process.executeSessionCommand('s1', { command: 'cat /tmp/referee/hello.txt; stat -c %a /tmp/referee/hello.txt' })
report('upload', { stdout: r3.stdout })

const r4 = await sb.process.executeSessionCommand('s1', { command: 'ls /sys/class/net' })
report('network-deny', { interfaces: r4.stdout.trim().split(/\s+/) })

// A command past its client timeout: the adapter deletes its session, which
// kills it.
await sb.process.createSession('s2')
const t0 = Date.now()
const timedOut = await errName(sb.process.executeSessionCommand('s2', { command: 'sleep 30' }, 1))
const elapsedMs = Date.now() - t0
await sb.process.deleteSession('s2')
await new Promise((r) => setTimeout(r, 300))
const ps = await sb.process.executeSessionCommand('s1', { command: 'ps -o args | grep -c "^sleep 30" || true' })
report('run-timeout', { error: timedOut, elapsedMs, sleepers: ps.stdout.trim() })
await sb.process.deleteSession('s1')

const listed = []
for await (const x of daytona.list({ labels: { 'sandboxio.tenant_id': 'acme' } })) listed.push(x.id)
const none = []
for await (const x of daytona.list({ labels: { 'sandboxio.tenant_id': 'other' } })) none.push(x.id)
report('list', { listed, others: none.length })

const got = await daytona.get(sb.id)
report('get', { state: got.state, labels: got.labels, networkBlockAll: got.networkBlockAll, memory: got.memory })

await sb.delete()
report('delete', { afterDelete: await errName(daytona.get(sb.id)), secondDelete: await errName(sb.delete()) })

// Vendor-side lifetime: idle for autoStopInterval minutes (a minute is
// REFEREE_MINUTE_MS here), the sandbox is stopped and, with
// autoDeleteInterval 0, deleted.
const idle = await daytona.create({ snapshot, labels: { referee: 'idle' }, autoStopInterval: 1, autoDeleteInterval: 0 }, { timeout: 120 })
await new Promise((r) => setTimeout(r, Number(process.env.REFEREE_MINUTE_MS) * 2))
report('auto-stop', { get: await errName(daytona.get(idle.id)), run: await errName(idle.process.createSession('late')) })

const bad = new Daytona({ apiKey: 'not-the-key', apiUrl: process.env.DAYTONA_API_URL, target: 'us' })
report('bad-key', { error: await errName(bad.get('whatever')) })

// Resources with a snapshot are refused (Daytona sizes a snapshot's
// sandboxes itself): why the adapter sends the image as a build.
report('snapshot-with-resources', { error: await errName(daytona.create({ snapshot, resources: { cpu: 1, memory: 1 } }, { timeout: 30 })) })
report('unknown-snapshot', { error: await errName(daytona.create({ snapshot: 'no-such-snapshot' }, { timeout: 30 })) })
report('done', {})
