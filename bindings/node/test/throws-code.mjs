// The tests' check of a typed error: `fn` throws an instance of `Ctor` with the stable `code`
// and, when given, the `field` it names. Returns the error for further checks.
import assert from 'node:assert/strict'

export function throwsCode(fn, Ctor, code, field) {
  let err
  try {
    fn()
  } catch (e) {
    err = e
  }
  assert.ok(err, `expected ${Ctor.name} ${code}`)
  assert.ok(err instanceof Ctor, `expected ${Ctor.name}, got ${err?.name}: ${err?.message}`)
  assert.equal(err.code, code, err.message)
  if (field !== undefined) assert.equal(err.field, field, err.message)
  return err
}
