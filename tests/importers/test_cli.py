"""`autocomp import`: the verb writes the folder and prints what it kept, dropped and renamed."""

from __future__ import annotations

from autocomp.cli.main import main


def test_import_release_prints_its_summary(color_release, tmp_path, capsys):
    out = tmp_path / "bench"
    assert (
        main(["import", "autocomp-release", "--source", str(color_release), "--out", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    assert f"imported 9 samples into {out}" in printed
    assert "unmapped objects: Chips x1" in printed
    assert "unmapped attributes: white x1" in printed
    assert "normalised objects: Cookies -> cookie, Frame -> picture frame" in printed
    assert "rows dropped: 1 (duplicate concept" in printed
    assert (out / "import_report.json").is_file()


def test_import_sugarcrepe_with_force_replaces_the_folder(sugarcrepe, tmp_path, capsys):
    source, images = sugarcrepe
    out = tmp_path / "bench"
    argv = [
        "import",
        "sugarcrepe",
        "--source",
        str(source),
        "--out",
        str(out),
        "--images",
        str(images),
    ]
    assert main(argv) == 0
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert "imported 3 samples" in capsys.readouterr().out
