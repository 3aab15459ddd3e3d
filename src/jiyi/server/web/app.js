// jiyi web page: a client of the REST API on the same origin (../v1/...).
// Safety rule: data from the API is only ever put into the page as text
// (textContent, DOM nodes); no innerHTML anywhere, so stored text cannot inject markup.
"use strict";

(() => {
  const TYPES = ["preference", "fact", "skill", "habit", "event", "context", "constraint", "decision", "pattern"];
  const STATUSES = ["active", "archived", "superseded"];
  const SCOPES = ["user_id", "project_id", "session_id", "agent_id"];
  const KEY_STORE = "jiyi.apiKey";
  // the library's recommended cut (jiyi.read.rank.RECOMMENDED_MIN_RELEVANCE): below it a hit
  // does not answer the query, however it ranks
  const MIN_RELEVANCE = 0.5;
  // fields whose change every edit makes; the history shows the others
  const ALWAYS_CHANGING = new Set(["updated_at", "version"]);

  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ DOM helpers

  /** An element with text children only: el("li", {className: "x"}, "text", otherNode). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "dataset") Object.assign(node.dataset, v);
      else if (k.startsWith("aria-") || k === "role") node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function clear(node) {
    node.replaceChildren();
    return node;
  }

  function shorten(text, n) {
    const chars = Array.from(text || ""); // by code point: never split a Chinese character pair
    return chars.length > n ? chars.slice(0, n).join("") + "…" : chars.join("");
  }

  function when(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
  }

  function fmtNumber(v) {
    return typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : "—";
  }

  function memoryHref(id) {
    return "#/memories/" + encodeURIComponent(id);
  }

  // ------------------------------------------------------------------ API

  class ApiFailure extends Error {
    constructor(status, code, message, field, decision) {
      super(message);
      this.status = status;
      this.code = code;
      this.field = field || null;
      this.decision = decision || null;
    }
  }

  function apiKey() {
    try {
      return sessionStorage.getItem(KEY_STORE) || "";
    } catch {
      return ""; // storage disabled: the page still works on a server without keys
    }
  }

  async function api(method, path, { query, body } = {}) {
    // relative to the page (…/ui/), so the page also works behind a path prefix
    const url = new URL("../" + path, document.baseURI);
    for (const [k, v] of Object.entries(query || {})) {
      if (v === null || v === undefined || v === "") continue;
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, String(one));
    }
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const key = apiKey();
    if (key) headers["X-API-Key"] = key;
    let resp;
    try {
      resp = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
        credentials: "omit",
      });
    } catch (e) {
      throw new ApiFailure(0, "network", `cannot reach the server (${e.message}); is jiyi serve running?`);
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (!resp.ok) {
      const err = data && typeof data === "object" && data.error ? data.error : {};
      const message = typeof err.message === "string" ? err.message : shorten(text, 300) || resp.statusText;
      throw new ApiFailure(resp.status, err.code || "http_" + resp.status, message, err.field, err.decision);
    }
    return data;
  }

  // ------------------------------------------------------------------ messages

  const TITLES = {
    0: "Server unreachable",
    401: "API key needed",
    403: "Not allowed",
    404: "Not found",
    413: "Too large",
    422: "Invalid input",
    429: "Too many requests",
  };

  function describe(err) {
    if (!(err instanceof ApiFailure)) return `Unexpected error in the page: ${err && err.message}`;
    const title = TITLES[err.status] || (err.status >= 500 ? "Server error" : "Request failed");
    let text = `${title}: ${err.message}`;
    if (err.field) text += ` (field: ${err.field})`;
    if (err.status) text += ` [${err.status} ${err.code}]`;
    if (err.status === 401) text += " — enter an API key at the top of the page.";
    return text;
  }

  function showError(err) {
    $("notice-text").textContent = describe(err);
    $("notice").hidden = false;
    $("status").textContent = "";
    if (err instanceof ApiFailure && err.status === 401) {
      // a key revoked or forgotten since the page last asked: the key box says so too
      keyState = apiKey() ? "refused" : "needed";
      refreshKeyState();
      $("api-key").focus();
    }
  }

  function showNotice(text) {
    $("notice-text").textContent = text;
    $("notice").hidden = false;
  }

  function clearNotice() {
    $("notice").hidden = true;
    $("notice-text").textContent = "";
  }

  function say(text) {
    $("status").textContent = text;
  }

  // "1 result", "2 results": a count with its noun.
  function count(n, one, many = one + "s") {
    return `${n} ${n === 1 ? one : many}`;
  }

  let pending = 0; // actions under way; the page is aria-busy while any is

  // A newer load of the same view makes an older one stale: its answer is dropped, so a
  // slow first response cannot overwrite a fast second one.
  const generation = { list: 0, detail: 0, stats: 0, profile: 0, context: 0 };
  function ticket(view) {
    const mine = ++generation[view];
    return () => generation[view] === mine;
  }

  /** Run an action: buttons disabled meanwhile, errors shown to the person. */
  async function act(buttons, fn) {
    const busy = (Array.isArray(buttons) ? buttons : [buttons]).filter(Boolean);
    busy.forEach((b) => (b.disabled = true));
    pending += 1;
    document.body.setAttribute("aria-busy", "true");
    try {
      await fn();
      return true;
    } catch (err) {
      showError(err);
      if (!(err instanceof ApiFailure)) console.warn(err); // a bug in the page: keep the trace
      return false;
    } finally {
      busy.forEach((b) => (b.disabled = false));
      syncButtons();
      pending -= 1;
      if (!pending) document.body.removeAttribute("aria-busy");
    }
  }

  // ------------------------------------------------------------------ scope and filters

  function scope() {
    const ids = {};
    for (const [name, input] of [
      ["user_id", $("f-user")],
      ["project_id", $("f-project")],
      ["session_id", $("f-session")],
      ["agent_id", $("f-agent")],
    ]) {
      const v = input.value.trim();
      if (v) ids[name] = v;
    }
    return ids;
  }

  function scopeLabel(ids) {
    const parts = SCOPES.filter((k) => ids[k]).map((k) => `${k.replace("_id", "")} ${ids[k]}`);
    return parts.length ? parts.join(", ") : "the whole tenant";
  }

  function fillSelect(select, values) {
    for (const v of values) select.append(el("option", { value: v }, v));
  }

  // ------------------------------------------------------------------ list and search

  const list = { mode: "list", cursor: null, count: 0, ids: {}, query: {} };

  function pct(v) {
    return `${Math.round(v * 100)}%`;
  }

  /** Why a search hit was found, as [signal, sentence] pairs, from its ``breakdown``. */
  function explanation(hit) {
    const b = hit.breakdown || {};
    const num = (k) => (typeof b[k] === "number" ? b[k] : 0);
    return [
      ...relevanceLine(hit),
      ...evidenceLines(b, num),
      ...adjustmentLines(b, num),
      ["score", scoreSentence(hit.score, b)],
    ];
  }

  function relevanceLine(hit) {
    if (typeof hit.relevance !== "number") return [];
    // The page asks for every match and cuts at MIN_RELEVANCE itself (runSearch), so a hit
    // below the cut is listed only because "Show everything" is ticked.
    const verdict =
      hit.relevance >= MIN_RELEVANCE
        ? "answers the query"
        : `probably does not answer the query (below ${pct(MIN_RELEVANCE)}; listed because “Show everything” is ticked)`;
    return [["relevance", `Relevance ${pct(hit.relevance)}: ${verdict}`]];
  }

  /** The evidence behind the match: meaning, words, time, the kind of answer, neighbouring turns. */
  function evidenceLines(b, num) {
    const out = [["vector", `Meaning: vector similarity ${num("cosine").toFixed(2)} to the query`]];
    const bm25 = num("keyword_bm25");
    const coverage = "relevance.coverage" in b ? `, ${pct(num("relevance.coverage"))} of the query's words` : "";
    out.push([
      "keywords",
      bm25 > 0 ? `Words: shares words with the query (BM25 ${bm25.toFixed(2)}${coverage})` : "Words: no word of the query",
    ]);
    if (num("query.time_windows") > 0) {
      const inside = num("similarity.time") > 0 || num("relevance.time") > 0;
      out.push(["time", `Time: ${inside ? "within" : "outside"} the time the query names`]);
    }
    if (num("similarity.answer") > 0) {
      out.push(["answer", "Answer: holds the kind of answer the query asks for (a time, a number or a place)"]);
    }
    if (num("similarity.speaker") > 0) {
      out.push(["speaker", "Speaker: said by the person the query names"]);
    }
    if (num("similarity.reply") > 0) {
      out.push(["reply", "Reply: answers a question the turn before it asked, and that question matches the query"]);
    }
    if (num("similarity.continues") > 0) {
      out.push(["continues", "Continues: goes on with what the same speaker said two turns before, and that matches the query"]);
    }
    if (num("similarity.sentence") > 0) {
      out.push(["sentence", "Best sentence: one of its sentences matches the query better than the whole text"]);
    }
    if (num("similarity.only_asks") < 0) {
      out.push(["asks", "Only asks: the memory only asks a question, which rarely holds an answer, so its evidence counts less"]);
    }
    if (Math.max(num("cosine.neighbours"), num("keyword_bm25.neighbours"), num("similarity.neighbours")) > 0) {
      const vec = num("cosine.neighbours").toFixed(2);
      const kw = num("keyword_bm25.neighbours").toFixed(2);
      out.push(["neighbours", `Neighbours: the turns around it also match (vector ${vec}, BM25 ${kw})`]);
    }
    return out;
  }

  /** What moved the score besides the match: recency, a re-ranker, replacement. */
  function adjustmentLines(b, num) {
    const out = [];
    if ("contribution.recency_boost" in b) {
      out.push(["recency", `Recency: recently used or changed, ${signed(num("contribution.recency_boost"))} to the score`]);
    }
    if ("contribution.decay" in b) {
      out.push(["recency", `Recency: fades with age, ${signed(num("contribution.decay"))} to the score`]);
    }
    if ("rerank.raw" in b) {
      const before = num("rerank.similarity_before").toFixed(2);
      out.push(["rerank", `Re-ranker: ${num("rerank.normalised").toFixed(2)} on its 0–1 scale (similarity was ${before})`]);
    }
    if (num("contribution.superseded") < 0) {
      const v = signed(num("contribution.superseded"));
      out.push(["superseded", `Superseded: a newer statement replaced it, so its match counts less (${v})`]);
    }
    if (num("contribution.replaced") < 0) {
      const v = signed(num("contribution.replaced"));
      out.push(["replaced", `Replaced: kept just below the memory that replaced it (${v})`]);
    }
    return out;
  }

  function signed(v) {
    return (v >= 0 ? "+" : "−") + Math.abs(v).toFixed(2);
  }

  // names of the score's parts (contribution.* in the breakdown)
  const PARTS = {
    similarity: "match",
    importance_boost: "importance",
    decay: "recency",
    recency_boost: "recency",
  };

  function scoreSentence(score, b) {
    const parts = Object.entries(b)
      .filter(([k]) => k.startsWith("contribution."))
      .map(([k, v]) => `${PARTS[k.slice(13)] || k.slice(13).replaceAll("_", " ")} ${signed(v)}`);
    return `Rank score ${fmtNumber(score)}` + (parts.length ? ` = ${parts.join(", ")}` : "");
  }

  function whyList(hit) {
    const ul = el("ul", { className: "why", "aria-label": "Why this was found" });
    for (const [signal, text] of explanation(hit)) ul.append(el("li", { dataset: { signal } }, text));
    return ul;
  }

  function itemMeta(item, score) {
    const meta = el("span", { className: "meta" });
    meta.append(
      el("span", { className: "badge type" }, item.memory_type),
      el("span", { className: "badge status-" + item.status }, item.status),
      el("span", {}, `${item.scope}: ${scopeIdOf(item)}`),
      el("span", {}, `importance ${fmtNumber(item.importance)}`),
    );
    if (item.tags && item.tags.length) meta.append(el("span", {}, "tags: " + item.tags.join(", ")));
    if (score !== undefined) meta.append(el("span", {}, `score ${fmtNumber(score)}`));
    meta.append(el("span", { title: item.created_at }, when(item.created_at)));
    return meta;
  }

  function scopeIdOf(item) {
    return item[item.scope + "_id"] || "";
  }

  function resultRow(item, hit) {
    const link = el("a", { href: memoryHref(item.id), className: "item-link" }, shorten(item.content, 240));
    const li = el("li", { dataset: { id: item.id } }, link, itemMeta(item, hit ? hit.score : undefined));
    if (hit) li.append(whyList(hit));
    if (current && current.id === item.id) link.setAttribute("aria-current", "true");
    return li;
  }

  function setResultsTitle(text, note) {
    $("results-title").textContent = text;
    $("results-note").textContent = note || "";
  }

  async function runList(append) {
    // "More" continues the listing as it was asked for, even if the form changed since:
    // a cursor is only valid with the filters that produced it
    const ids = append ? list.ids : scope();
    const query = append
      ? { ...list.query, cursor: list.cursor }
      : {
          ...ids,
          memory_type: $("f-type").value,
          status: $("f-status").value,
          limit: $("f-limit").value,
          newest_first: "true",
        };
    say("Loading…");
    const latest = ticket("list");
    const page = await api("GET", "v1/memories", { query });
    if (!latest()) return;
    const ol = $("result-list");
    if (!append) {
      clear(ol);
      list.count = 0;
    }
    list.mode = "list";
    list.ids = ids;
    list.query = { ...query, cursor: null };
    for (const item of page.items) ol.append(resultRow(item));
    list.count += page.items.length;
    list.cursor = page.next_cursor;
    $("more-btn").hidden = !list.cursor;
    setResultsTitle(
      `Memories (${list.count}${list.cursor ? "+" : ""})`,
      `Newest first, in ${scopeLabel(ids)}.` + (list.count ? "" : " Nothing here yet."),
    );
    if (!append) syncAddress("memories");
    say(`${count(list.count, "memory", "memories")} shown${list.cursor ? "; more available" : ""}.`);
  }

  async function runSearch() {
    const text = $("q").value.trim();
    if (!text) return runList(false);
    const ids = scope();
    if (!Object.keys(ids).length) {
      // the API would refuse too; say it here without a round trip
      showNotice("Search needs a scope: enter a user, project, session or agent id above, then search again.");
      $("f-user").focus();
      return;
    }
    const type = $("f-type").value;
    const status = $("f-status").value;
    const everything = $("f-all").checked;
    const body = {
      query: text,
      ...ids,
      memory_types: type ? [type] : [],
      // "any status" means every status, as in the list (the API's default is active only)
      statuses: status ? [status] : STATUSES,
      limit: Number($("f-limit").value),
      explain: true,
    };
    // Every match comes back; the page cuts at MIN_RELEVANCE itself, so it can say how
    // many weaker matches it hid (nothing vanishes without a word).
    body.min_relevance = 0;
    say("Searching…");
    const latest = ticket("list");
    const res = await api("POST", "v1/memories/search", { body });
    if (!latest()) return;
    const hits = everything ? res.hits : res.hits.filter((h) => (h.relevance ?? 1) >= MIN_RELEVANCE);
    const hidden = res.hits.length - hits.length;
    const ol = clear($("result-list"));
    for (const hit of hits) ol.append(resultRow(hit.item, hit));
    list.mode = "search";
    list.cursor = null;
    list.count = hits.length;
    $("more-btn").hidden = true;
    const cut = everything
      ? " Everything is shown, however weak the match."
      : ` Only hits with relevance of ${pct(MIN_RELEVANCE)} or more.`;
    const none = hits.length ? "" : everything ? " No match." : " Nothing relevant is remembered.";
    const weaker = hidden
      ? ` ${count(hidden, "weaker match", "weaker matches")} hidden; tick “Show everything” to see them.`
      : "";
    setResultsTitle(
      `Search results (${hits.length})`,
      `Best first for “${shorten(text, 80)}” in ${scopeLabel(ids)}.` + cut + none + weaker,
    );
    syncAddress("memories");
    say(`${count(hits.length, "result")}.`);
  }

  function replaceRow(item) {
    const old = $("result-list").querySelector(`li[data-id="${CSS.escape(item.id)}"]`);
    if (old) old.replaceWith(resultRow(item));
  }

  function removeRow(id) {
    const old = $("result-list").querySelector(`li[data-id="${CSS.escape(id)}"]`);
    if (old) {
      old.remove();
      list.count = Math.max(0, list.count - 1);
    }
  }

  // ------------------------------------------------------------------ one memory

  let current = null; // the item shown in the detail pane

  function fieldValue(key, value) {
    if (value === null || value === undefined) return el("dd", { className: "muted" }, "—");
    if (typeof value === "object") {
      if (Array.isArray(value) && value.every((v) => typeof v === "string")) {
        return el("dd", {}, value.length ? value.join(", ") : "—");
      }
      return el("dd", {}, el("pre", {}, JSON.stringify(value, null, 2)));
    }
    if (key.endsWith("_at")) return el("dd", { title: when(value) }, String(value));
    return el("dd", {}, String(value));
  }

  function renderFields(item) {
    const dl = clear($("fields"));
    for (const [key, value] of Object.entries(item)) dl.append(el("dt", {}, key), fieldValue(key, value));
  }

  function fillEdit(item) {
    $("e-content").value = item.content;
    $("e-type").value = item.memory_type;
    $("e-importance").value = String(item.importance);
    $("e-status").value = item.status;
    $("e-tags").value = (item.tags || []).join(", ");
    $("e-reason").value = "";
  }

  function showItem(item) {
    current = item;
    $("detail-empty").hidden = true;
    $("detail-body").hidden = false;
    $("detail-title").textContent = `${item.memory_type} · version ${item.version} · ${item.status}`;
    $("detail-content").textContent = item.content;
    syncButtons();
    fillEdit(item);
    renderFields(item);
    for (const a of document.querySelectorAll("#result-list .item-link")) {
      if (a.closest("li").dataset.id === item.id) a.setAttribute("aria-current", "true");
      else a.removeAttribute("aria-current");
    }
  }

  function syncButtons() {
    $("archive-btn").disabled = !current || current.status === "archived";
  }

  function showGone(text) {
    current = null;
    $("detail-body").hidden = true;
    $("detail-empty").hidden = false;
    $("detail-empty").textContent = text;
    $("detail-title").textContent = "Details";
  }

  async function renderRelations(item) {
    const ul = clear($("relations"));
    $("relations-empty").hidden = item.relations.length > 0;
    const rows = item.relations.map((rel) => {
      const target = el("span", { className: "muted" }, "loading…");
      const link = el("a", { href: memoryHref(rel.target_id) }, rel.target_id);
      ul.append(
        el(
          "li",
          {},
          el("span", { className: "badge rel" }, rel.type.replaceAll("_", " ")),
          " ",
          link,
          el("span", { className: "muted" }, ` strength ${fmtNumber(rel.strength)} `),
          target,
        ),
      );
      return { rel, target };
    });
    await Promise.all(
      rows.map(async ({ rel, target }) => {
        try {
          const other = await api("GET", "v1/memories/" + encodeURIComponent(rel.target_id));
          target.className = "";
          target.textContent = `“${shorten(other.content, 120)}” (${other.status})`;
        } catch (err) {
          target.textContent = err instanceof ApiFailure && err.status === 404 ? "(no longer exists)" : describe(err);
        }
      }),
    );
  }

  function changes(before, after) {
    const keys = new Set([...Object.keys(before || {}), ...Object.keys(after || {})]);
    const out = [];
    for (const key of keys) {
      if (ALWAYS_CHANGING.has(key)) continue;
      const a = JSON.stringify(before ? before[key] : undefined);
      const b = JSON.stringify(after ? after[key] : undefined);
      if (a !== b) out.push([key, before ? before[key] : undefined, after ? after[key] : undefined]);
    }
    return out;
  }

  function show(v, key) {
    if (v === undefined || v === null) return "—";
    if (key === "relations" && Array.isArray(v)) {
      // "superseded by 91f2…" reads better than the JSON of the relation
      return v.length ? v.map((r) => `${String(r.type).replaceAll("_", " ")} ${r.target_id}`).join("; ") : "none";
    }
    return typeof v === "string" ? shorten(v, 300) : shorten(JSON.stringify(v), 300);
  }

  const ACTIONS = {
    add: "added",
    import: "imported",
    update: "edited",
    merge: "merged with a similar statement",
    reinforce: "confirmed again",
    supersede: "superseded: a newer statement replaced it",
    archive: "archived",
    restore: "restored",
    delete: "deleted",
  };
  const CHAIN_LIMIT = 20; // statements followed along supersedes links, each way together

  function relTargets(item, type) {
    return (item.relations || []).filter((r) => r.type === type).map((r) => r.target_id);
  }

  function shortLink(item) {
    return el("a", { href: memoryHref(item.id) }, `“${shorten(item.content, 80)}”`);
  }

  /** The statements this fact went through: ``item`` and what it replaced and was replaced by. */
  async function factChain(item) {
    const chain = new Map([[item.id, item]]);
    const todo = [...relTargets(item, "supersedes"), ...relTargets(item, "superseded_by")];
    while (todo.length && chain.size < CHAIN_LIMIT) {
      const id = todo.shift();
      if (chain.has(id)) continue;
      let other;
      try {
        other = await api("GET", "v1/memories/" + encodeURIComponent(id));
      } catch (err) {
        if (err instanceof ApiFailure && err.status === 404) continue; // deleted since
        throw err;
      }
      chain.set(id, other);
      todo.push(...relTargets(other, "supersedes"), ...relTargets(other, "superseded_by"));
    }
    return chain;
  }

  function renderLineage(item, chain) {
    const p = clear($("lineage"));
    for (const [type, label] of [["superseded_by", "Replaced by "], ["supersedes", "Replaces "]]) {
      for (const id of relTargets(item, type)) {
        const other = chain.get(id);
        p.append(el("span", { className: "lineage-" + type.replace("_", "-") }, label, other ? shortLink(other) : el("a", { href: memoryHref(id) }, id), " "));
      }
    }
    p.hidden = !p.childNodes.length;
  }

  function eventHead(ev, other) {
    const head = el(
      "p",
      { className: "event-head" },
      el("strong", {}, ev.action),
      ` · version ${ev.version} · `,
      el("time", { dateTime: ev.at, title: ev.at }, when(ev.at)),
      ` · by ${ev.actor || "(actor not recorded)"}`,
    );
    const what = ACTIONS[ev.action] || ev.action.replaceAll("_", " ");
    const label = other
      ? el("p", { className: "event-what" }, "The statement ", shortLink(other), ` was ${what}`)
      : el("p", { className: "event-what" }, what.charAt(0).toUpperCase() + what.slice(1));
    return [head, label];
  }

  function eventDiff(ev) {
    if (ev.before && ev.after) {
      const diff = changes(ev.before, ev.after);
      if (!diff.length) return null;
      const ul = el("ul", { className: "diff" });
      for (const [key, a, b] of diff) {
        ul.append(el("li", {}, el("code", {}, key), ": ", el("del", {}, show(a, key)), " → ", el("ins", {}, show(b, key))));
      }
      return ul;
    }
    return ev.after ? el("p", { className: "diff" }, "content: ", el("ins", {}, show(ev.after.content))) : null;
  }

  /** Every version of the fact, newest first: this item's history merged with those of the
   * statements it replaced or was replaced by. */
  async function renderHistory(item) {
    const chain = await factChain(item);
    renderLineage(item, chain);
    const lists = await Promise.all(
      [...chain.values()].map(async (it) =>
        (await api("GET", `v1/memories/${encodeURIComponent(it.id)}/history`)).map((ev, i) => ({ ev, it, i })),
      ),
    );
    const all = lists.flat();
    all.sort((a, b) => Date.parse(b.ev.at) - Date.parse(a.ev.at) || (b.ev.seq ?? b.i) - (a.ev.seq ?? a.i));
    const ol = clear($("history"));
    for (const { ev, it } of all) {
      const other = it.id !== item.id ? it : null;
      const li = el(
        "li",
        { className: other ? "event other" : "event", dataset: { action: ev.action, version: String(ev.version), item: it.id } },
        ...eventHead(ev, other),
      );
      if (ev.reason) li.append(el("p", { className: "reason" }, "Why: " + ev.reason));
      if (ev.action === "supersede") {
        for (const id of relTargets(it, "superseded_by")) {
          const next = chain.get(id);
          li.append(el("p", { className: "replaced-by" }, "Replaced by ", next ? shortLink(next) : el("a", { href: memoryHref(id) }, id)));
        }
      }
      const diff = eventDiff(ev);
      if (diff) li.append(diff);
      ol.append(li);
    }
  }

  /** "Served for": the queries that retrieved this memory (the retrieval log), newest first. */
  async function renderServed(item) {
    const why = await api("GET", `v1/memories/${encodeURIComponent(item.id)}/retrievals?limit=20`);
    const last = why.last_used_at ? when(why.last_used_at) : "never";
    $("served-summary").textContent = why.served.length
      ? `Served ${why.access_count} time(s), last ${last}.` + (why.next_cursor ? " Showing the latest 20." : "")
      : "Not served by any logged query yet.";
    const ol = clear($("served"));
    for (const s of why.served) {
      const scores = [`#${s.rank}`, `score ${s.score.toFixed(3)}`];
      if (s.similarity !== null) scores.push(`similarity ${s.similarity.toFixed(3)}`);
      if (s.relevance !== null) scores.push(`relevance ${s.relevance.toFixed(3)}`);
      const whom = [s.user_id && `user ${s.user_id}`, s.project_id && `project ${s.project_id}`, s.actor && `by ${s.actor}`];
      ol.append(
        el(
          "li",
          { dataset: { kind: s.kind } },
          el("span", { className: "badge" }, s.kind),
          " ",
          el("q", {}, s.query),
          el("p", { className: "muted" }, `${when(s.at)} · ${scores.join(" · ")} · ${whom.filter(Boolean).join(", ") || "—"}`),
        ),
      );
    }
  }

  async function openMemory(id) {
    say("Loading memory…");
    const latest = ticket("detail");
    const item = await api("GET", "v1/memories/" + encodeURIComponent(id));
    if (!latest()) return;
    showItem(item);
    await Promise.all([renderHistory(item), renderRelations(item), renderServed(item)]);
    say(`Showing memory ${item.id}.`);
  }

  function parseTags(text) {
    // both the ASCII and the full-width comma separate tags
    return [...new Set(text.split(/[,，、]/).map((t) => t.trim()).filter(Boolean))];
  }

  async function saveEdit() {
    if (!current) return;
    const item = current;
    const body = {};
    const content = $("e-content").value;
    if (!content.trim()) {
      showNotice("Content must not be empty: to remove a memory, archive or delete it.");
      $("e-content").focus();
      return;
    }
    if (content !== item.content) body.content = content;
    if ($("e-type").value !== item.memory_type) body.memory_type = $("e-type").value;
    const importance = Number($("e-importance").value);
    if (!(importance >= 0 && importance <= 1)) {
      showNotice("Importance must be a number from 0 to 1.");
      $("e-importance").focus();
      return;
    }
    if (importance !== item.importance) body.importance = importance;
    if ($("e-status").value !== item.status) body.status = $("e-status").value;
    const tags = parseTags($("e-tags").value);
    if (JSON.stringify(tags) !== JSON.stringify(item.tags || [])) body.tags = tags;
    if (!Object.keys(body).length) {
      showNotice("Nothing changed: edit a field first.");
      return;
    }
    const reason = $("e-reason").value.trim();
    if (reason) body.reason = reason;
    const updated = await api("PATCH", "v1/memories/" + encodeURIComponent(item.id), { body });
    clearNotice();
    showItem(updated);
    replaceRow(updated);
    await renderHistory(updated);
    say(`Saved: now version ${updated.version}.`);
    $("detail-title").focus();
  }

  async function archive() {
    if (!current) return;
    const updated = await api("DELETE", "v1/memories/" + encodeURIComponent(current.id));
    clearNotice();
    showItem(updated);
    replaceRow(updated);
    await renderHistory(updated);
    say("Archived. Set the status back to active to restore it.");
  }

  async function purge() {
    if (!current) return;
    const item = current;
    const ok = window.confirm(
      `Delete this memory permanently?\n\n“${shorten(item.content, 200)}”\n\n` +
        "This cannot be undone (its history is kept). Archive it instead to keep it restorable.",
    );
    if (!ok) {
      say("Not deleted.");
      return;
    }
    await api("DELETE", "v1/memories/" + encodeURIComponent(item.id), { query: { hard: "true" } });
    clearNotice();
    removeRow(item.id);
    showGone(`Memory ${item.id} was deleted permanently.`);
    say("Deleted permanently.");
    if (location.hash === memoryHref(item.id)) history.replaceState(null, "", "#/memories");
    $("detail-title").focus();
  }

  // ------------------------------------------------------------------ stats

  function countTable(title, counts) {
    const table = el("table", { className: "counts" }, el("caption", {}, title));
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    table.append(
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "name"), el("th", { scope: "col" }, "count"), el("th", { scope: "col" }, "share"))),
    );
    const body = el("tbody");
    const entries = Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    for (const [name, n] of entries) {
      body.append(
        el(
          "tr",
          { dataset: { name } },
          el("th", { scope: "row" }, name),
          el("td", { className: "num" }, String(n)),
          el("td", {}, el("meter", { min: 0, max: total || 1, value: n, title: `${n} of ${total}` })),
        ),
      );
    }
    if (!entries.length) body.append(el("tr", {}, el("td", { colSpan: 3, className: "muted" }, "none")));
    table.append(body);
    return table;
  }

  async function loadStats() {
    const ids = scope();
    say("Loading stats…");
    const latest = ticket("stats");
    const s = await api("GET", "v1/stats", { query: ids });
    if (!latest()) return;
    $("stats-scope").textContent = `For ${scopeLabel(ids)}.`;
    const dl = clear($("stats-summary"));
    for (const [label, value, id] of [
      ["Memories", String(s.total), "stat-total"],
      ["Average confidence", fmtNumber(s.avg_confidence), "stat-confidence"],
      ["Average importance", fmtNumber(s.avg_importance), "stat-importance"],
    ]) {
      dl.append(el("div", {}, el("dt", {}, label), el("dd", { id }, value)));
    }
    clear($("stats-tables")).append(
      countTable("By type", s.by_type),
      countTable("By scope", s.by_scope),
      countTable("By status", s.by_status),
    );
    syncAddress("stats");
    say(`Stats: ${count(s.total, "memory", "memories")}.`);
  }

  // ------------------------------------------------------------------ profile

  function profileScope() {
    const which = $("p-scope").value;
    const id = scope()[which];
    if (!id) {
      const name = which === "user_id" ? "user" : "project";
      showNotice(`Enter a ${name} id in the scope above to see that ${name}'s profile.`);
      $(which === "user_id" ? "f-user" : "f-project").focus();
      return null;
    }
    return { [which]: id };
  }

  let profile = null; // the profile shown, as the API returned it

  function decisionText(d) {
    if (typeof d === "string") return d;
    const parts = [d.decision];
    if (d.reason) parts.push(`because ${d.reason}`);
    if (d.at) parts.push(`(${when(d.at)})`);
    return parts.join(" ");
  }

  function isEmpty(value) {
    return value === null || value === undefined || value === "" || (Array.isArray(value) && !value.length);
  }

  function profileValue(value) {
    const td = el("td", { className: "value" });
    if (isEmpty(value)) {
      td.append(el("span", { className: "muted" }, "—"));
    } else if (Array.isArray(value)) {
      const ul = el("ul", { className: "plain" });
      for (const v of value) ul.append(el("li", {}, typeof v === "string" ? v : decisionText(v)));
      td.append(ul);
    } else {
      td.append(typeof value === "string" ? value : JSON.stringify(value));
    }
    return td;
  }

  function renderProfile(p) {
    profile = p;
    $("profile-body").hidden = false;
    $("profile-caption").textContent = `Profile of ${p.scope} ${p.scope_id}`;
    const tbody = clear($("profile-rows"));
    const select = $("pf-name");
    const chosen = select.value;
    clear(select);
    const fields = Object.entries(p.fields || {});
    for (const [name, f] of fields) {
      select.append(el("option", { value: name }, name));
      const evidence = el("td", { className: "evidence" });
      for (const id of f.evidence || []) {
        evidence.append(el("a", { href: memoryHref(id), title: "Open memory " + id }, id), " ");
      }
      if (!(f.evidence || []).length) evidence.append(el("span", { className: "muted" }, "—"));
      tbody.append(
        el(
          "tr",
          { dataset: { field: name, source: f.source } },
          el("th", { scope: "row" }, name.replaceAll("_", " ")),
          profileValue(f.value),
          el(
            "td",
            {},
            isEmpty(f.value)
              ? el("span", { className: "muted" }, "—") // nothing known: no source to name
              : el("span", { className: "badge source-" + f.source }, f.source),
          ),
          evidence,
        ),
      );
    }
    if (!fields.length) tbody.append(el("tr", {}, el("td", { colSpan: 4, className: "muted" }, "No profile fields.")));
    if (chosen && p.fields && chosen in p.fields) select.value = chosen;
    fillProfileValue();
    $("profile-text").textContent = p.text || "(nothing known yet)";
  }

  /** The edit box shows the chosen field's value: lists one entry per line. */
  function fillProfileValue() {
    const name = $("pf-name").value;
    const f = profile && profile.fields ? profile.fields[name] : null;
    const value = f ? f.value : null;
    let text = "";
    let hint = "(empty: back to what the memories say)";
    if (Array.isArray(value)) {
      hint = "(one entry per line; empty: back to what the memories say)";
    }
    if (Array.isArray(value)) {
      const objects = value.some((v) => v && typeof v === "object");
      // decisions keep their reason and date only as JSON; plain lines are new decisions
      text = objects ? JSON.stringify(value, null, 2) : value.join("\n");
    } else if (typeof value === "string") text = value;
    $("pf-value").value = text;
    $("pf-hint").textContent = hint;
  }

  function profileInput(name, text) {
    const f = profile && profile.fields ? profile.fields[name] : null;
    const trimmed = text.trim();
    if (!trimmed) return null; // clears the explicit value
    if (trimmed.startsWith("[")) {
      try {
        return JSON.parse(trimmed);
      } catch {
        /* not JSON: taken as lines below */
      }
    }
    const isList = f && Array.isArray(f.value);
    if (!isList) return trimmed;
    return trimmed.split(/\r?\n/).map((t) => t.trim()).filter(Boolean);
  }

  async function loadProfile() {
    const query = profileScope();
    if (!query) return;
    say("Loading profile…");
    const latest = ticket("profile");
    const p = await api("GET", "v1/profile", { query });
    if (!latest()) return;
    renderProfile(p);
    syncAddress("profile");
    say("Profile loaded.");
  }

  async function saveProfileField() {
    const query = profileScope();
    if (!query) return;
    if (!profile || profile.scope_id !== Object.values(query)[0]) {
      showNotice("Load the profile first, then set a field.");
      return;
    }
    const name = $("pf-name").value;
    const value = profileInput(name, $("pf-value").value);
    renderProfile(await api("PATCH", "v1/profile", { query, body: { fields: { [name]: value } } }));
    clearNotice();
    say(value === null ? `Cleared the explicit value of ${name}.` : `Saved ${name}.`);
  }

  // ------------------------------------------------------------------ context

  function positiveInt(input, name, max) {
    const n = Number(input.value);
    if (!Number.isInteger(n) || n < 1 || n > max) {
      showNotice(`${name} must be a whole number from 1 to ${max}.`);
      input.focus();
      return null;
    }
    return n;
  }

  function contextEntry(e) {
    const head = el(
      "p",
      { className: "entry-head" },
      el("span", { className: "badge source" }, e.source),
      ` ${e.tokens} tokens`,
      typeof e.score === "number" ? ` · score ${fmtNumber(e.score)}` : "",
    );
    if (e.item_id) head.append(" · memory ", el("a", { href: memoryHref(e.item_id) }, e.item_id));
    if (e.message_id) head.append(` · message ${e.message_id}`);
    return el("li", { dataset: { source: e.source } }, head, el("pre", {}, e.text));
  }

  async function loadContext() {
    const query = $("c-query").value.trim();
    if (!query) {
      showNotice("Enter the query the agent is about to answer, then press Enter.");
      $("c-query").focus();
      return;
    }
    const budget = positiveInt($("c-budget"), "The budget", 1000000);
    const maxItems = budget && positiveInt($("c-max"), "The number of entries", 1000);
    if (!budget || !maxItems) return;
    const ids = scope();
    say("Assembling context…");
    const latest = ticket("context");
    const res = await api("POST", "v1/context", { body: { query, ...ids, budget_tokens: budget, max_items: maxItems } });
    if (!latest()) return;
    $("context-body").hidden = false;
    const dl = clear($("context-summary"));
    for (const [label, value, id] of [
      ["Tokens", `${res.tokens} of ${budget}` + (res.tokens > budget ? ` (over by ${res.tokens - budget})` : ""), "ctx-tokens"],
      ["Entries", String(res.entries.length), "ctx-entries"],
      ["Left out (over budget or cap)", String(res.dropped), "ctx-dropped"],
      ["Profile", res.profile ? "included" : "none", "ctx-profile"],
    ]) {
      dl.append(el("div", {}, el("dt", {}, label), el("dd", { id }, value)));
    }
    const rows = clear($("context-source-rows"));
    for (const [source, n] of Object.entries(res.by_source)) {
      rows.append(el("tr", { dataset: { source } }, el("th", { scope: "row" }, source), el("td", { className: "num" }, String(n))));
    }
    if (!rows.childNodes.length) rows.append(el("tr", {}, el("td", { colSpan: 2, className: "muted" }, "nothing")));
    const ol = clear($("context-entries"));
    for (const e of res.entries) ol.append(contextEntry(e));
    $("context-text").textContent = res.text || "(empty: nothing remembered fits this query)";
    syncAddress("context");
    say(`Context for ${scopeLabel(ids)}: ${count(res.tokens, "token")}, ${count(res.entries.length, "entry", "entries")}, ${res.dropped} left out.`);
  }

  // ------------------------------------------------------------------ views and routing

  const VIEWS = ["memories", "context", "stats", "profile"];
  // address parameters (#/view/id?user_id=…&q=…) and the form fields they fill
  const PARAMS = {
    user_id: "f-user",
    project_id: "f-project",
    session_id: "f-session",
    agent_id: "f-agent",
    q: "q",
    type: "f-type",
    status: "f-status",
    query: "c-query",
    budget: "c-budget",
    of: "p-scope",
  };
  const VIEW_PARAMS = { memories: ["q", "type", "status"], context: ["query", "budget"], profile: ["of"], stats: [] };

  function showView(name) {
    for (const v of VIEWS) {
      $("view-" + v).hidden = v !== name;
      const link = $("nav-" + v);
      if (v === name) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  function parseAddress() {
    const hash = location.hash.replace(/^#\/?/, "");
    const q = hash.indexOf("?");
    const path = q < 0 ? hash : hash.slice(0, q);
    const params = new URLSearchParams(q < 0 ? "" : hash.slice(q + 1));
    const [view, ...rest] = path.split("/");
    const id = rest.length && rest[0] ? decodeURIComponent(rest.join("/")) : null;
    return { view: VIEWS.includes(view) ? view : "memories", id, params };
  }

  /** Fill the form fields an address names; true if it named any. */
  function applyParams(params) {
    let any = false;
    for (const [name, id] of Object.entries(PARAMS)) {
      if (!params.has(name)) continue;
      const input = $(id);
      const value = params.get(name) || "";
      if (input.tagName === "SELECT" && ![...input.options].some((o) => o.value === value)) continue;
      input.value = value;
      any = true;
    }
    if (params.has("all")) {
      $("f-all").checked = params.get("all") === "1";
      any = true;
    }
    return any;
  }

  /** Put the scope and the view's inputs into the address, so it can be bookmarked or shared. */
  function syncAddress(view) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(scope())) params.set(k, v);
    for (const name of VIEW_PARAMS[view]) {
      const value = $(PARAMS[name]).value.trim();
      if (value) params.set(name, value);
    }
    if (view === "memories" && $("f-all").checked) params.set("all", "1");
    const here = parseAddress();
    const item = view === "memories" && here.view === "memories" && here.id ? "/" + encodeURIComponent(here.id) : "";
    const qs = params.toString();
    if (!qs && !item && !location.hash) return; // the bare page stays bare
    const hash = `#/${view}${item}${qs ? "?" + qs : ""}`;
    if (hash !== location.hash) history.replaceState(null, "", hash);
  }

  const findButtons = () => [$("search-btn"), $("list-btn")];
  const runFind = () => ($("q").value.trim() ? runSearch() : runList(false));

  /** Show the view the address names; ``load`` also (re)loads its data (first paint, new key). */
  async function route(load) {
    const { view, id, params } = parseAddress();
    const named = applyParams(params);
    showView(view);
    const fresh = load === true || named;
    if (view === "stats") {
      await act([$("stats-refresh")], loadStats);
      return;
    }
    if (view === "profile") {
      if (fresh && scope()[$("p-scope").value]) await act([$("profile-load")], loadProfile);
      else $("profile-title").focus();
      return;
    }
    if (view === "context") {
      if (fresh && $("c-query").value.trim()) await act([$("context-btn")], loadContext);
      else $("c-query").focus();
      return;
    }
    const jobs = [];
    if (id && (fresh || !current || current.id !== id || $("detail-body").hidden)) {
      jobs.push(
        act([], () => openMemory(id)).then((ok) => {
          if (ok) $("detail-title").focus();
          else showGone(`Could not open memory ${id}.`);
          return ok;
        }),
      );
    }
    if (fresh) jobs.push(act(findButtons(), runFind));
    const done = await Promise.all(jobs);
    if (done.length && done.every(Boolean)) clearNotice();
  }

  // ------------------------------------------------------------------ the API key

  let keyState = "unknown"; // open | needed | refused | accepted | unknown

  const KEY_TEXT = {
    open: ["this server needs no key", "not needed on this server"],
    needed: ["this server needs a key; none is set", "required on this server"],
    refused: ["the key set for this tab was refused", "required on this server: enter a valid key"],
    accepted: ["a key is set for this tab and accepted", "a key is set; enter another to replace it"],
  };

  function refreshKeyState() {
    const [state, placeholder] = KEY_TEXT[keyState] || [apiKey() ? "a key is set for this tab" : "no key set", "API key"];
    $("key-state").textContent = state;
    $("api-key").placeholder = placeholder;
  }

  /** Ask the server whether it needs a key (and takes ours): a cheap read, 401 or not. */
  async function probeKey() {
    let failure = null;
    try {
      await api("GET", "v1/memories", { query: { limit: 1 } });
      keyState = apiKey() ? "accepted" : "open";
    } catch (err) {
      failure = err;
      if (err instanceof ApiFailure && err.status === 401) keyState = apiKey() ? "refused" : "needed";
      else keyState = "unknown";
    }
    refreshKeyState();
    return failure;
  }

  function storeKey(key) {
    try {
      if (key) sessionStorage.setItem(KEY_STORE, key);
      else sessionStorage.removeItem(KEY_STORE);
    } catch {
      showNotice("This browser does not allow session storage, so the key cannot be kept.");
    }
  }

  async function useKey(key) {
    storeKey(key);
    $("api-key").value = "";
    clearNotice();
    const failure = await probeKey();
    if (failure && keyState !== "unknown") {
      showError(failure);
      return;
    }
    say(key ? "Key set for this tab." : "Key removed.");
    await route(true); // what the view could not show without the key, it shows now
  }

  async function start() {
    const failure = await probeKey();
    if (failure && (keyState === "needed" || keyState === "refused")) {
      showView(parseAddress().view);
      applyParams(parseAddress().params);
      showError(failure);
      return;
    }
    await route(true);
  }

  function init() {
    fillSelect($("f-type"), TYPES);
    fillSelect($("f-status"), STATUSES);
    fillSelect($("e-type"), TYPES);
    fillSelect($("e-status"), STATUSES);
    refreshKeyState();

    $("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const key = $("api-key").value.trim();
      act([$("key-save")], () => useKey(key));
    });
    $("key-forget").addEventListener("click", () => {
      storeKey("");
      $("api-key").value = "";
      say("Key forgotten.");
      act([$("key-forget")], probeKey);
    });
    $("notice-close").addEventListener("click", clearNotice);

    const find = (e) => {
      e.preventDefault();
      clearNotice();
      act([$("search-btn"), $("list-btn")], runSearch);
    };
    $("search-form").addEventListener("submit", find);
    // Enter in a scope field refreshes whatever view is showing
    $("scope-form").addEventListener("submit", (e) => {
      if (!$("view-stats").hidden) {
        e.preventDefault();
        clearNotice();
        act([$("stats-refresh")], loadStats);
      } else if (!$("view-profile").hidden) {
        e.preventDefault();
        clearNotice();
        act([$("profile-load")], loadProfile);
      } else if (!$("view-context").hidden) {
        e.preventDefault();
        clearNotice();
        act([$("context-btn")], loadContext);
      } else find(e);
    });
    $("list-btn").addEventListener("click", () => {
      clearNotice();
      $("q").value = "";
      act([$("search-btn"), $("list-btn")], () => runList(false));
    });
    $("more-btn").addEventListener("click", () => {
      const first = $("result-list").children.length;
      act([$("more-btn")], async () => {
        await runList(true);
        // keyboard users land on the first new row, not back at the top
        const next = $("result-list").children[first];
        if (next) next.querySelector("a").focus();
      });
    });
    $("edit-form").addEventListener("submit", (e) => {
      e.preventDefault();
      act([$("save-btn")], saveEdit);
    });
    $("archive-btn").addEventListener("click", () => act([$("archive-btn")], archive));
    $("purge-btn").addEventListener("click", () => act([$("purge-btn")], purge));
    $("stats-refresh").addEventListener("click", () => act([$("stats-refresh")], loadStats));
    $("profile-form").addEventListener("submit", (e) => {
      e.preventDefault();
      act([$("profile-load")], loadProfile);
    });
    $("pf-name").addEventListener("change", fillProfileValue);
    $("context-form").addEventListener("submit", (e) => {
      e.preventDefault();
      clearNotice();
      act([$("context-btn")], loadContext);
    });
    $("profile-edit").addEventListener("submit", (e) => {
      e.preventDefault();
      act([$("pf-save")], saveProfileField);
    });

    window.addEventListener("hashchange", () => route(false));
    act([], start); // the body is aria-busy from the markup until this first load is done
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
