/* The explorer's selection rules in the page, for the clientside callbacks of
 * app/explorer/views (a click that only changes the selection needs no server round
 * trip). They mirror app/selection.py's apply_event and to_query exactly. */
window.stateseer = Object.assign(window.stateseer || {}, {
  EMPTY: {split: null, state: null, row: null, pattern: null},

  applyEvent(sel, event, payload) {
    const s = sel || {};
    const out = Object.assign({}, s);
    if (event === 'clear') {
      return {split: s.split === undefined ? null : s.split, state: null, row: null,
              pattern: null};
    }
    if (event === 'state') {
      out.state = payload === s.state ? null : payload;
    } else if (event === 'row') {
      out.row = payload;
      out.pick = (s.pick || 0) + 1;
    } else if (event === 'pattern') {
      const same = s.pattern && s.pattern.kind === payload.kind &&
        s.pattern.index === payload.index;
      out.pattern = same ? null : payload;
    } else if (event === 'split') {
      Object.assign(out, {split: payload, row: null, pattern: null});
    }
    return out;
  },

  toQuery(sel) {
    const q = new URLSearchParams();
    if (sel.split) q.append('split', sel.split);
    if (sel.state !== null && sel.state !== undefined) q.append('state', String(sel.state));
    if (sel.row !== null && sel.row !== undefined) q.append('row', String(sel.row));
    if (sel.pattern) q.append('pattern', sel.pattern.kind + ':' + sel.pattern.index);
    const s = q.toString();
    return s ? '?' + s : '';
  },

  /* [selection, URL search] after an event, as the select callbacks return them */
  select(sel, event, payload) {
    const out = window.stateseer.applyEvent(sel, event, payload);
    return [out, window.stateseer.toQuery(out)];
  },
});
