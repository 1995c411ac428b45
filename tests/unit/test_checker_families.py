"""Command families a user expects to be judged: each member pauses with its rule and effect
class, and its harmless near-twins run."""

from __future__ import annotations

import pytest

from run_bash.checker import check

P = pytest.param

# (command, rule, effect)
PAUSES: list[tuple[str, str, str]] = [
    # git: refs without a reflog, objects dropped for good, commands run in each submodule
    ("git tag -d v1", "git", "irreversible"),
    ("git tag --delete v1 v2", "git", "irreversible"),
    ("git tag -f v1", "git", "irreversible"),
    ("git tag -fa v1 -m x", "git", "irreversible"),
    ("git -C repo tag --force v1 HEAD~1", "git", "irreversible"),
    ("git tag -l | xargs git tag -d", "git", "irreversible"),
    ("git replace -d abc", "git", "irreversible"),
    ("git replace -f abc def", "git", "irreversible"),
    ("git repack -ad", "git", "irreversible"),
    ("git repack -a -d -f", "git", "irreversible"),
    ("git lfs prune", "git", "irreversible"),
    ("git submodule foreach --recursive git clean -fdx", "git", "irreversible"),
    ("git submodule --quiet foreach -- git push -f", "git", "irreversible"),
    ("git submodule foreach git reset --hard HEAD~1", "git", "irreversible"),
    # containers: signals, forced removal, images and caches deleted, images published
    ("docker kill c", "docker", "irreversible"),
    ("docker container kill c", "docker", "irreversible"),
    ("podman kill c", "podman", "irreversible"),
    ("podman pod kill p", "podman", "irreversible"),
    ("podman pod rm -f p", "podman", "irreversible"),
    ("docker rmi img", "docker", "irreversible"),
    ("docker image rm img", "docker", "irreversible"),
    ("docker image prune -a -f", "docker", "irreversible"),
    ("docker container prune -f", "docker", "irreversible"),
    ("docker network rm n", "docker", "irreversible"),
    ("docker buildx prune -af", "docker", "irreversible"),
    ("docker builder prune -af", "docker", "irreversible"),
    ("docker push img:latest", "docker", "irreversible"),
    ("podman push img", "podman", "irreversible"),
    ("docker image push img", "docker", "irreversible"),
    ("docker manifest push img", "docker", "irreversible"),
    ("docker buildx build --push -t img .", "docker", "irreversible"),
    ("docker build --push -t img .", "docker", "irreversible"),
    ("docker buildx build -o type=registry -t img .", "docker", "irreversible"),
    ("docker compose -p p rm -fsv", "docker", "irreversible"),
    ("docker compose kill", "docker", "irreversible"),
    ("docker-compose push", "docker-compose", "irreversible"),
    ("docker service rm s", "docker", "irreversible"),
    ("docker stack rm s", "docker", "irreversible"),
    ("docker swarm leave --force", "docker", "irreversible"),
    # HTTP DELETE and GitHub deletes
    ("curl -X DELETE https://api.example.com/x", "curl", "irreversible"),
    ("curl -XDELETE https://api.example.com/x", "curl", "irreversible"),
    ("curl -sSX DELETE https://api.example.com/x", "curl", "irreversible"),
    ("curl --request delete https://api.example.com/x", "curl", "irreversible"),
    ('curl -X "$METHOD" https://api.example.com/x', "curl", "irreversible"),
    ("wget --method=DELETE https://api.example.com/x", "wget", "irreversible"),
    ("http DELETE https://api.example.com/x", "http", "irreversible"),
    ("xh delete api.example.com/x", "xh", "irreversible"),
    ("xhs DELETE api.example.com/x", "xhs", "irreversible"),
    ("https --verify=no DELETE api.example.com/x", "https", "irreversible"),
    ("httpie DELETE api.example.com/x", "httpie", "irreversible"),
    ("gh api -X DELETE repos/o/r", "gh", "irreversible"),
    ("gh api --method DELETE /repos/o/r/git/refs/heads/x", "gh", "irreversible"),
    ("gh secret delete TOKEN", "gh", "irreversible"),
    ("gh -R o/r release delete-asset v1 a.zip", "gh", "irreversible"),
    ("gh label delete bug --yes", "gh", "irreversible"),
    ("gh run delete 123", "gh", "irreversible"),
    ("gh repo archive o/r -y", "gh", "irreversible"),
]

RUNS: list[str] = [
    "git tag v1",
    "git tag -a v1 -m x",
    "git tag -l",
    "git tag -n5",
    "git tag --sort=-v:refname",
    "git tag -e v1",
    "git replace -l",
    "git replace abc def",
    "git repack",
    "git repack -d",
    "git repack -Ad",
    "git lfs pull",
    "git lfs ls-files",
    "git branch -M main",
    "git branch -m old new",
    "git branch -f",
    "git branch -f main abc",  # the branch's reflog keeps where it was
    "git submodule foreach git status",
    "git submodule foreach --recursive 'echo $name'",
    "git submodule foreach --recursive git pull",
    "docker rm c",
    "docker rm -f web",  # containers are disposable; their volumes are not
    "docker stop c",
    "docker image ls",
    "docker images",
    "docker network ls",
    "docker build -t x .",
    "docker buildx build --load -t x .",
    "docker buildx ls",
    "docker compose rm -f",
    "docker compose build",
    "docker service ls",
    "docker pull img",
    "podman pod ls",
    "curl -sSL https://example.com",
    "curl -X GET https://example.com",
    "curl -X POST -d @x https://example.com",
    "curl -H 'X-Token: y' https://example.com",
    "wget https://example.com/x.tar.gz",
    "http https://example.com",
    "http GET example.com",
    "xh get example.com",
    "gh api repos/o/r",
    "gh api -X GET repos/o/r",
    "gh secret list",
    "gh pr list",
    "gh issue view delete",
]


@pytest.mark.parametrize("cmd, rule, effect", [P(*c, id=c[0]) for c in PAUSES])
def test_a_family_member_pauses(cmd: str, rule: str, effect: str) -> None:
    verdict = check(cmd, strict=True)
    assert verdict.pause, (cmd, verdict)
    assert verdict.rule == rule, (cmd, verdict)
    assert verdict.effect == effect, (cmd, verdict)


@pytest.mark.parametrize("cmd", RUNS)
def test_a_harmless_near_twin_runs(cmd: str) -> None:
    verdict = check(cmd, strict=True)
    assert not verdict.pause, (cmd, verdict)
