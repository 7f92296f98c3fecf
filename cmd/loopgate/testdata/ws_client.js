// WebSocket client for the tunnel tests (node-ws). Usage:
//   NODE_PATH=/usr/share/nodejs node ws_client.js ws://HOST:PORT
// Runs every case against /echo and /refuse through the gateway and prints
// one line per case, "ok <case>" or "FAIL <case>: <why>"; exits 1 on a failure.
'use strict';
const WebSocket = require('ws');
const net = require('net');
const base = process.argv[2];

// A raw client for what a WebSocket library never does: frames written
// one byte at a time, and a frame sent in the same write as the upgrade
// request, before the 101.
function rawFrame(text) {
  const payload = Buffer.from(text);
  const mask = Buffer.from([7, 1, 4, 2]);
  const head = Buffer.from([0x81, 0x80 | payload.length]);
  const body = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i++) body[i] = payload[i] ^ mask[i % 4];
  return Buffer.concat([head, mask, body]);
}

function rawSession(firstWrite, afterUpgrade) {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: hostname, port: Number(port) });
    let buf = Buffer.alloc(0);
    let upgraded = false;
    s.setTimeout(20000, () => { s.destroy(); reject(new Error('timeout')); });
    s.on('error', reject);
    s.on('connect', () => s.write(firstWrite));
    s.on('data', async (d) => {
      buf = Buffer.concat([buf, d]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        if (!head.startsWith('HTTP/1.1 101')) { s.destroy(); reject(new Error(head.split('\r\n')[0])); return; }
        upgraded = true;
        buf = buf.subarray(end + 4);
        if (afterUpgrade) await afterUpgrade(s);
      }
      // An unmasked text frame of less than 126 bytes: 2 header bytes.
      if (buf.length >= 2 && buf.length >= 2 + (buf[1] & 0x7f)) {
        s.destroy();
        resolve(buf.subarray(2, 2 + (buf[1] & 0x7f)).toString());
      }
    });
  });
}

const handshake = 'GET /echo HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';

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
  async byteByByte() {
    const frame = rawFrame('one byte at a time');
    const got = await rawSession(handshake, async (s) => {
      for (const b of frame) {
        s.write(Buffer.from([b]));
        await new Promise((r) => setTimeout(r, 2));
      }
    });
    if (got !== 'one byte at a time') throw new Error('got ' + got);
  },
  async pipelined() {
    const got = await rawSession(Buffer.concat([Buffer.from(handshake), rawFrame('sent before the 101')]));
    if (got !== 'sent before the 101') throw new Error('got ' + got);
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
