// The referee: E2B's official JavaScript SDK (npm e2b, the version pinned in
// package-lock.json) drives the local conformance server through every
// operation the sandboxio adapter uses. Each step prints one JSON line
// {"step": ..., ...observed}; any mismatch throws, and the script exits
// non-zero. referee_test.go runs it and checks each step's result again.
//
// Environment: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY (set by the test),
// REFEREE_TEMPLATE (the template ID).
import { Sandbox, AuthenticationError, CommandExitError, TimeoutError, NotFoundError } from 'e2b'

const template = process.env.REFEREE_TEMPLATE
const tag = `referee-${process.pid}-${Date.now()}`
const metadata = { 'sandboxio.tenant_id': 'acme', 'sandboxio.session_id': tag, 'needs encoding': 'a&b=c %' }

function out(step, fields) {
  console.log(JSON.stringify({ step, ...fields }))
}

function check(cond, what) {
  if (!cond) throw new Error(`referee: ${what}`)
}

async function listIds(query) {
  const paginator = Sandbox.list({ query: { metadata: query } })
  const items = []
  while (paginator.hasNext) items.push(...(await paginator.nextItems()))
  return items
}

async function errorOf(fn) {
  try {
    await fn()
    return null
  } catch (e) {
    return e
  }
}

async function main() {
  // create, with metadata, envs, a lifetime and the egress fields: deny all
  // but an allow list.
  const sbx = await Sandbox.create(template, {
    metadata,
    envs: { REFEREE_VAR: 'from-create' },
    timeoutMs: 60_000,
    allowInternetAccess: false,
    network: { denyOut: ['0.0.0.0/0'], allowOut: ['8.8.8.8/32', 'pypi.org'] },
  })
  check(/^[a-z0-9]{20}$/.test(sbx.sandboxId), `sandbox id ${sbx.sandboxId}`)
  out('create', { sandboxId: sbx.sandboxId })

  // commands.run: stdout, stderr and a non-zero exit code, env from create
  // and from the call.
  const failed = await errorOf(() => sbx.commands.run('echo out-$REFEREE_VAR-$CALL_VAR; echo err >&2; exit 3', { envs: { CALL_VAR: 'call' } }))
  check(failed instanceof CommandExitError, `a failing command throws CommandExitError, got ${failed}`)
  check(failed.exitCode === 3 && failed.stdout === 'out-from-create-call\n' && failed.stderr === 'err\n',
    `exit 3 with separate streams, got ${JSON.stringify([failed.exitCode, failed.stdout, failed.stderr])}`)
  out('run-exit', { exitCode: failed.exitCode, stdout: failed.stdout, stderr: failed.stderr })

  const ok = await sbx.commands.run('pwd; echo ok')
  check(ok.exitCode === 0 && ok.stdout === '/home/user\nok\n', `run ok, got ${JSON.stringify(ok)}`)
  out('run-ok', { exitCode: ok.exitCode, stdout: ok.stdout })

  // a timeout: the SDK gives up after timeoutMs and the process is gone.
  const t0 = Date.now()
  const timedOut = await errorOf(() => sbx.commands.run('sleep 41; echo late', { timeoutMs: 1000 }))
  const elapsed = Date.now() - t0
  check(timedOut instanceof TimeoutError, `a command past timeoutMs throws TimeoutError, got ${timedOut}`)
  let ps = ''
  for (let i = 0; i < 50; i++) {
    ps = (await sbx.commands.run('ps')).stdout
    if (!ps.includes('sleep 41')) break
    await new Promise((r) => setTimeout(r, 100))
  }
  check(!ps.includes('sleep 41'), `the timed-out process was killed, ps shows:\n${ps}`)
  out('run-timeout', { error: timedOut.name, elapsedMs: elapsed, killed: true })

  // files.write, absolute and relative to the home directory.
  const info = await sbx.files.write('/tmp/referee/hello.txt', 'hello from the referee\n')
  check(info.path === '/tmp/referee/hello.txt', `write info ${JSON.stringify(info)}`)
  await sbx.files.write('rel.txt', 'relative\n')
  const cat = await sbx.commands.run('cat /tmp/referee/hello.txt /home/user/rel.txt')
  check(cat.stdout === 'hello from the referee\nrelative\n', `read back ${JSON.stringify(cat.stdout)}`)
  out('write', { path: info.path, readBack: cat.stdout })

  // no network under deny (the local sandbox has no interface but lo).
  const net = await sbx.commands.run('cat /proc/net/dev')
  check(!/eth\d|ens|enp/.test(net.stdout), `no network interface under deny:\n${net.stdout}`)
  out('network-deny', { interfaces: net.stdout.split('\n').filter((l) => l.includes(':')).map((l) => l.split(':')[0].trim()) })

  // setTimeout, then list by metadata shows the new end.
  await sbx.setTimeout(120_000)
  const listed = await listIds(metadata)
  check(listed.length === 1 && listed[0].sandboxId === sbx.sandboxId, `list by metadata, got ${JSON.stringify(listed)}`)
  const endIn = listed[0].endAt.getTime() - Date.now()
  check(endIn > 100_000 && endIn <= 121_000, `endAt after setTimeout(120 s) is in ${endIn} ms`)
  check(listed[0].metadata['needs encoding'] === 'a&b=c %', `metadata round trip ${JSON.stringify(listed[0].metadata)}`)
  const other = await listIds({ 'sandboxio.tenant_id': 'acme', 'sandboxio.session_id': 'no-such-session' })
  check(other.length === 0, `a non-matching metadata filter lists nothing, got ${other.length}`)
  out('set-timeout-list', { listed: listed.map((s) => s.sandboxId), endInMs: endIn, state: listed[0].state })

  // kill, idempotently; the sandbox is gone from the list and from envd.
  await sbx.kill()
  const again = await Sandbox.kill(sbx.sandboxId)
  check(again === false, `a second kill reports not found (false), got ${again}`)
  check((await listIds(metadata)).length === 0, 'killed sandbox still listed')
  const afterKill = await errorOf(() => sbx.commands.run('echo alive'))
  check(afterKill !== null, 'a command in a killed sandbox fails')
  out('kill', { secondKill: again, afterKill: afterKill.name })

  // lifetime: a sandbox past its timeout is gone.
  const short = await Sandbox.create(template, { metadata: { ...metadata, lifetime: 'short' }, timeoutMs: 2000, allowInternetAccess: false })
  await new Promise((r) => setTimeout(r, 3500))
  const expiredList = await listIds({ ...metadata, lifetime: 'short' })
  const expiredRun = await errorOf(() => short.commands.run('echo alive'))
  const expiredKill = await Sandbox.kill(short.sandboxId)
  check(expiredList.length === 0 && expiredRun !== null && expiredKill === false, 'an expired sandbox is gone')
  out('lifetime', { listed: expiredList.length, run: expiredRun.name, kill: expiredKill })

  // a bad API key: AuthenticationError, nothing created.
  const bad = await errorOf(() => Sandbox.create(template, { apiKey: 'e2b_0000000000000000000000000000000000000000', metadata }))
  check(bad instanceof AuthenticationError, `a bad key throws AuthenticationError, got ${bad}`)
  out('bad-key', { error: bad.name })

  // an unknown template: the API's 404 reaches the caller.
  const missing = await errorOf(() => Sandbox.create('no-such-template', { metadata }))
  check(missing !== null && /not found/i.test(missing.message), `unknown template, got ${missing}`)
  out('unknown-template', { error: missing.name, notFound: missing instanceof NotFoundError || /404/.test(missing.message) })
}

main().then(
  () => out('done', {}),
  (e) => {
    console.error(e && e.stack ? e.stack : String(e))
    process.exit(1)
  },
)
