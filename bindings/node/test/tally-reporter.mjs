// A node:test reporter that prints one line per test and ends with the plain tally line the
// conformance matrix reads: `N passed, N failed, N skipped`.
export default async function* tally(source) {
  let passed = 0
  let failed = 0
  let skipped = 0
  for await (const ev of source) {
    if (ev.type !== 'test:pass' && ev.type !== 'test:fail') continue
    const d = ev.data
    if (d.details?.type === 'suite') {
      if (ev.type === 'test:fail' && d.details?.error?.failureType !== 'subtestsFailed') {
        failed++
        yield `FAIL ${d.name}: ${message(d.details.error)}\n`
      }
      continue
    }
    if (d.skip !== undefined || d.todo !== undefined) {
      skipped++
      yield `SKIP ${d.name}\n`
    } else if (ev.type === 'test:pass') {
      passed++
      yield `ok   ${d.name}\n`
    } else {
      failed++
      yield `FAIL ${d.name}: ${message(d.details?.error)}\n`
    }
  }
  yield `${passed} passed, ${failed} failed, ${skipped} skipped\n`
}

function message(err) {
  const e = err?.cause ?? err
  return String(e?.message ?? e).split('\n').join('\n     ')
}
