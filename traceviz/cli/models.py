"""``traceviz models``: the variant registry, and whether each variant can run here."""

from __future__ import annotations

import argparse

from traceviz.cli.base import Command, json_text, stdout, width_arg


class ModelsCommand(Command):
    name = "models"
    help = "list the LSTM variants, their framework, and whether they can run here"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        # here, not at the top: another command's parser imports no runner
        from traceviz.runners import DEVICES, FRAMEWORKS

        p.add_argument("--json", action="store_true", help="print as JSON")
        p.add_argument("--names", action="store_true",
                       help="print only the names, one per line (for scripts)")
        p.add_argument("--framework", choices=list(FRAMEWORKS),
                       help="only this framework's variants")
        p.add_argument("--device", choices=DEVICES,
                       help="only the variants that run on this device")
        p.add_argument("--width", type=width_arg,
                       help="terminal width for the table (at least 40 columns)")

    def run(self, args: argparse.Namespace) -> int:
        from traceviz.runners import FRAMEWORKS, default_device, variants

        chosen = variants(args.framework, args.device)
        if args.names:
            for v in chosen:
                print(v.name)
            return 0
        cuda = None
        rows = []
        for v in chosen:
            fw = FRAMEWORKS[v.framework]
            if not fw.installed():
                ok, why = False, fw.missing()  # with the command that installs it
            elif v.gpu_only:
                if cuda is None:
                    cuda = default_device() == "cuda"
                ok, why = cuda, "" if cuda else "needs a CUDA GPU; none is visible"
            else:
                ok, why = True, ""
            rows.append({"name": v.name, "framework": v.framework,
                         "description": v.description, "devices": list(v.devices),
                         "available": ok, "why_not": why})
        if args.json:
            print(json_text(rows))
            return 0
        from traceviz.render.terminal.fit import Col, fitted_table

        out = stdout(args.width)
        cols = (Col("name", "left"), Col("framework", "left"), Col("runs here", "left", wrap=True),
                Col("what it is", "left", wrap=True))
        table, _ = fitted_table("LSTM variants", cols, [
            [str(r["name"]), str(r["framework"]),
             "yes" if r["available"] else f"no: {r['why_not']}", str(r["description"])]
            for r in rows], out.width)
        out.print(table)
        return 0
