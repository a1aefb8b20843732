/*
 * The operator's actions, as the command catalogue (GET api/commands) lists them. Each
 * command with a console action is offered where its scope says: with the pause
 * controls (a barrier, bound to the [data-command] buttons there), on every worker's
 * row, or in the engine panel (a button made here); a viewer's token sees the
 * operator's actions unavailable. A command the catalogue does not list is not offered.
 */

import { duration, names } from "./format.js";
import { noteOperation } from "./generation.js";
import { access, busy, setAvailable, showResult, ui, VIEWER_WHY } from "./page.js";
import { api } from "./session.js";

const VIEWER_REFUSAL = "This token can view but not operate (viewer).";
/** A barrier's answer may take its timeout and then some. */
const BARRIER_GRACE_MS = 15000;

/** What an answer says, its top-level fields in order ("dropped tokens 12; flushed yes"). */
function fieldsSaid(body) {
  const said = Object.entries(body)
    .filter(([, value]) => value === null || typeof value !== "object" || Array.isArray(value))
    .map(([key, value]) => {
      const shown = Array.isArray(value) ? names(value) || "none" : value === true ? "yes" : value === false ? "no" : `${value}`;
      return `${key.replace(/_/g, " ")} ${shown}`;
    });
  return said.join("; ") || "done";
}

export function describeFailure(what, answer) {
  if (answer.status === 0) return `${what} failed: the admin app did not answer (${answer.message}).`;
  if (answer.status === 401) return `${what} refused (401): the token was not accepted.`;
  if (answer.status === 403) return `${what} refused (403 forbidden): this token can view but not operate.`;
  const detail = answer.message ? `: ${answer.message}` : "";
  return `${what} failed (${answer.status} ${answer.code})${detail}`;
}

/** A command's path relative to the page, its {parameters} filled in. */
function apiPath(command, parameters = {}) {
  const path = command.path.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(parameters[name]));
  return path.replace(/^\//, "");
}

/** The control holding a body argument's value (data-argument="<name>"). */
const control = (name) => document.querySelector(`[data-argument="${name}"]`);

/** Give each choice list of the pause controls (data-argument) ``command``'s choices for
 * that argument, keeping what is chosen, else the page's preference (data-prefer). */
function fillChoices(command) {
  for (const argument of command.arguments) {
    const select = control(argument.name);
    if (!(select instanceof HTMLSelectElement) || !argument.choices.length) continue;
    const keep = select.value || select.dataset.prefer || argument.default;
    select.replaceChildren(...argument.choices.map((choice) => new Option(choice, choice, false, choice === keep)));
  }
}

function barrierTimeout() {
  const value = Number(control("timeout_s")?.value);
  return Number.isFinite(value) && value > 0 && value <= 600 ? value : null;
}

export class Actions {
  /** workers: the WorkerTable; onAuthFailure(answer): a 401 or 403 on an action. */
  constructor({ workers, onAuthFailure }) {
    this.workers = workers;
    this.onAuthFailure = onAuthFailure;
    /** The console commands by name once the catalogue was read (a promise until then). */
    this.catalogue = null;
    this.loads = 0;
    this.generation = [...document.querySelectorAll("[data-command]")];
    this.engine = [];
    for (const button of this.generation) {
      button.addEventListener("click", () => this.barrier(button));
    }
  }

  /** Read the catalogue (again, for a new token) and lay out its actions. */
  load() {
    const load = ++this.loads;
    this.catalogue = api("GET", "api/commands").then((answer) => {
      if (load !== this.loads) return this.catalogue;
      if (!answer.ok || !Array.isArray(answer.body?.commands)) {
        // The event stream reports a refused token; a press reads the catalogue again.
        this.catalogue = null;
        return null;
      }
      return this.adopt(answer.body.commands);
    });
    return this.catalogue;
  }

  adopt(commands) {
    const offered = new Map(commands.filter((c) => c.console).map((c) => [c.name, c]));
    const scoped = (scope) => [...offered.values()].filter((c) => c.console.scope === scope);
    for (const command of scoped("generation")) fillChoices(command);
    const generation = new Set(scoped("generation").map((c) => c.name));
    for (const button of this.generation) button.hidden = !generation.has(button.dataset.command);
    this.workers.setActions(scoped("worker"));
    this.engine = scoped("engine").map((command) => this.engineButton(command));
    ui.engineActions.replaceChildren(...this.engine.map(({ group }) => group));
    ui.engineActions.hidden = this.engine.length === 0;
    this.offered = offered;
    this.refresh();
    return offered;
  }

  /** The catalogue's entry ``name``, reading the catalogue first if need be. */
  async command(name) {
    const offered = (await this.catalogue) ?? (await this.load());
    return offered?.get(name) ?? null;
  }

  /** An engine action's button, after an input for each body argument it takes but
   * its timeout: a choice list for one with choices (its default chosen), else a text
   * field (<name>-<argument>, e.g. update-weights-model). */
  engineButton(command) {
    const stem = command.name.replaceAll("_", "-");
    const group = document.createElement("span");
    group.className = "engine-action";
    const inputs = {};
    for (const argument of command.arguments) {
      if (argument.place !== "body" || argument.name === "timeout_s") continue;
      const input = argument.choices.length ? document.createElement("select") : document.createElement("input");
      for (const choice of argument.choices) {
        input.append(new Option(choice, choice, false, choice === argument.default));
      }
      if (!argument.choices.length) {
        input.type = "text";
        input.placeholder = argument.name;
        input.value = argument.default ?? "";
      }
      input.title = argument.summary;
      input.setAttribute("aria-label", `${command.console.label}: ${argument.name}`);
      input.dataset.testid = `${stem}-${argument.name.replaceAll("_", "-")}`;
      inputs[argument.name] = input;
      group.append(input);
    }
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = command.console.label;
    button.dataset.testid = `${stem}-button`;
    button.addEventListener("click", () => this.engineAction(command, button, inputs));
    group.append(button);
    return { command, button, group };
  }

  /** Mark every action available or not for the token's role. */
  refresh() {
    for (const button of this.generation) {
      const command = this.offered?.get(button.dataset.command);
      const allowed = command ? access.allows(command) : access.role !== "viewer";
      setAvailable(button, allowed, allowed ? "" : VIEWER_WHY);
    }
    for (const { command, button } of this.engine) {
      const allowed = access.allows(command);
      setAvailable(button, allowed, allowed ? "" : VIEWER_WHY);
    }
    this.workers.refreshButtons();
  }

  /** Pause or continue (any generation command): a barrier with the controls' values. */
  async barrier(button) {
    if (button.getAttribute("aria-disabled") === "true") {
      showResult("warning", VIEWER_REFUSAL);
      return;
    }
    const timeout = barrierTimeout();
    if (timeout === null) {
      showResult("error", "The timeout must be a number of seconds above 0 and at most 600.");
      control("timeout_s")?.focus();
      return;
    }
    await busy(button, async () => {
      const command = await this.command(button.dataset.command);
      if (command === null) {
        showResult("error", "The admin app did not list this action; reload the page.");
        return;
      }
      const body = {};
      for (const argument of command.arguments.filter((a) => a.place === "body")) {
        body[argument.name] =
          argument.name === "timeout_s" ? timeout : (control(argument.name)?.value ?? argument.default);
      }
      const label = body.mode ? `${command.console.label} (${body.mode})` : command.console.label;
      showResult("info", `${label}: waiting for every worker and the engine to acknowledge…`);
      const answer = await api(command.method, apiPath(command), body, timeout * 1000 + BARRIER_GRACE_MS);
      const op = answer.body;
      if ((answer.status === 200 || answer.status === 504) && op && Array.isArray(op.acked)) {
        noteOperation(op);
        const acked = names(op.acked) || "nobody";
        const took = Number.isFinite(op.elapsed_s) ? ` in ${duration(op.elapsed_s)}` : "";
        if (answer.status === 200 && op.complete) {
          const done = op.mode ? `${command.console.label} (${op.mode})` : command.console.label;
          showResult("ok", `${done}: acknowledged by ${acked}${took}.`, answer.status);
        } else {
          const stragglers = names(op.stragglers) || "unknown";
          showResult(
            "warning",
            `${label} timed out after ${timeout} s: no acknowledgement from ${stragglers}. ` +
              `Acknowledged by ${acked}.`,
            answer.status,
          );
        }
        return;
      }
      this.onAuthFailure(answer);
      showResult("error", describeFailure(label, answer), answer.status);
    });
  }

  /** A worker's action (drain, undrain) from its row. */
  async workerAction(row, command, button) {
    const verb = command.console.label;
    if (button.getAttribute("aria-disabled") === "true") {
      const st = row.worker?.state ?? "unknown";
      showResult(
        "warning",
        access.allows(command) ? `${verb} ${row.id}: not available while it is ${st}.` : VIEWER_REFUSAL,
      );
      return;
    }
    await busy(button, async () => {
      showResult("info", `${verb} ${row.id}…`);
      const answer = await api(command.method, apiPath(command, { worker_id: row.id }));
      if (answer.ok && answer.body && answer.body.id === row.id) {
        this.workers.upsert(answer.body);
        this.workers.order();
        const safe = answer.body.safe_to_delete ? "; safe to delete" : "";
        showResult("ok", `${verb} ${row.id}: now ${answer.body.state}${safe}.`, answer.status);
        return;
      }
      this.onAuthFailure(answer);
      showResult("error", describeFailure(`${verb} ${row.id}`, answer), answer.status);
    });
  }

  /** An action on the whole engine (freeze GC, flush the cache) from the engine panel;
   * the command's confirmation question first, when it has one. */
  async engineAction(command, button, inputs = {}) {
    const label = command.console.label;
    if (button.getAttribute("aria-disabled") === "true") {
      showResult("warning", VIEWER_REFUSAL);
      return;
    }
    if (command.console.confirm && !window.confirm(command.console.confirm)) {
      showResult("info", `${label}: not done (cancelled).`);
      return;
    }
    await busy(button, async () => {
      showResult("info", `${label}…`);
      const body = Object.fromEntries(Object.entries(inputs).map(([name, input]) => [name, input.value]));
      const waitMs = command.barrier || command.engine ? 120000 : undefined;
      const answer = Object.keys(body).length
        ? await api(command.method, apiPath(command), body, waitMs)
        : await api(command.method, apiPath(command), undefined, waitMs);
      if (answer.ok && answer.body && typeof answer.body === "object") {
        const said = fieldsSaid(answer.body);
        showResult("ok", `${label}: ${said}.`, answer.status);
        return;
      }
      this.onAuthFailure(answer);
      showResult("error", describeFailure(label, answer), answer.status);
    });
  }
}
