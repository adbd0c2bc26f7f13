// Small helpers the client scripts share: each check names what it
// expects, and the first that fails ends the script with a message.
export function check(ok, what, got) {
  if (!ok) {
    console.error(`FAIL: ${what}; got ${JSON.stringify(got, null, 1)}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

export function env(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`FAIL: ${name} is not set`);
    process.exit(2);
  }
  return v;
}
