// WebSocket client for the tunnel tests (node-ws). Usage:
//   NODE_PATH=/usr/share/nodejs node ws_client.js ws://HOST:PORT
// Runs every case against /echo and /refuse through the gateway and prints
// one line per case, "ok <case>" or "FAIL <case>: <why>"; exits 1 on a failure.
'use strict';
const WebSocket = require('ws');
const base = process.argv[2];

function open(path) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(base + path, { perMessageDeflate: false, maxPayload: 64 << 20 });
    ws.setMaxListeners(0); // next() adds a close listener per message
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (req, res) => reject(new Error('status ' + res.statusCode)));
  });
}

function next(ws) {
  return new Promise((resolve, reject) => {
    ws.once('message', (data, isBinary) => resolve({ data, isBinary }));
    ws.once('close', (code) => reject(new Error('closed ' + code)));
  });
}

function closed(ws) {
  return new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
}

const sizes = [1, 125, 126, 65535, 65536, 1 << 20, 16 << 20];

const cases = {
  async messages() {
    const ws = await open('/echo');
    for (const n of sizes) {
      const text = 'x'.repeat(n - 1) + 'y';
      ws.send(text);
      const t = await next(ws);
      if (t.isBinary || t.data.toString() !== text) throw new Error(`text of ${n} bytes came back different`);
      const bin = Buffer.alloc(n);
      for (let i = 0; i < n; i++) bin[i] = (i * 31 + (i >> 11)) & 0xff;
      ws.send(bin);
      const b = await next(ws);
      if (!b.isBinary || !Buffer.from(b.data).equals(bin)) throw new Error(`binary of ${n} bytes came back different`);
    }
    ws.close(1000, 'done');
    const c = await closed(ws);
    if (c.code !== 1000) throw new Error('client close: code ' + c.code);
  },
  async fragmented() {
    const ws = await open('/echo');
    ws.send('frag-', { fin: false });
    ws.send('men-', { fin: false });
    ws.send('ted', { fin: true });
    const m = await next(ws);
    if (m.data.toString() !== 'frag-men-ted') throw new Error('got ' + m.data.toString());
    ws.close(1000);
    await closed(ws);
  },
  async pingPong() {
    const ws = await open('/echo');
    const pong = new Promise((resolve) => ws.once('pong', (d) => resolve(d.toString())));
    ws.ping('are-you-there');
    const d = await pong;
    if (d !== 'are-you-there') throw new Error('pong carried ' + d);
    ws.close(1000);
    await closed(ws);
  },
  async serverClose() {
    const ws = await open('/echo');
    ws.send('server-close');
    const c = await closed(ws);
    if (c.code !== 4000 || c.reason !== 'bye') throw new Error(`close ${c.code} ${c.reason}`);
  },
  async refused() {
    try {
      await open('/refuse');
    } catch (e) {
      if (e.message === 'status 403') return;
      throw e;
    }
    throw new Error('the upgrade was accepted');
  },
};

(async () => {
  let failed = false;
  for (const [name, fn] of Object.entries(cases)) {
    try {
      await fn();
      console.log('ok ' + name);
    } catch (e) {
      failed = true;
      console.log(`FAIL ${name}: ${e.message}`);
    }
  }
  process.exit(failed ? 1 : 0);
})();
