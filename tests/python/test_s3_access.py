"""The job's S3 access, resolved as the AWS CLI resolves it (galley/s3_access.py):
the environment, profiles in the shared credentials and config files, their
precedence, region and endpoint settings, a profile's credential_process
(its JSON, its Expiration, its errors), and the error that names every
place looked in. Temporary files and a given environment: nothing of the
machine's own AWS setup is read."""

import datetime
import json
import sys

import pytest

from galley import s3_access
from galley.s3_access import S3CredentialProcessError, S3CredentialsNotFound


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def test_environment_credentials_come_first(home):
    write(home / ".aws" / "credentials",
          "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n")
    env = {"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "ENVSECRET",
           "AWS_SESSION_TOKEN": "ENVTOKEN"}
    access = s3_access.resolve(env, str(home))
    assert (access["access_key_id"], access["secret_access_key"], access["session_token"]) == (
        "ENVKEY", "ENVSECRET", "ENVTOKEN")
    assert access["region"] == "us-east-1"
    assert access["endpoint_url"] == "" and access["path_style"] is False


def test_the_default_profile_of_the_shared_credentials_file(home):
    write(home / ".aws" / "credentials",
          "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
          "aws_session_token = FILETOKEN\n")
    access = s3_access.resolve({}, str(home))
    assert (access["access_key_id"], access["secret_access_key"], access["session_token"]) == (
        "FILEKEY", "FILESECRET", "FILETOKEN")


def test_aws_profile_picks_its_sections_in_both_files(home):
    write(home / ".aws" / "credentials",
          "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
          "[work]\naws_access_key_id = W\naws_secret_access_key = WS\n")
    write(home / ".aws" / "config",
          "[default]\nregion = eu-west-1\n"
          "[profile work]\nregion = ap-south-1\nendpoint_url = https://objects.example.com/\n")
    access = s3_access.resolve({"AWS_PROFILE": "work"}, str(home))
    assert access["access_key_id"] == "W"
    assert access["region"] == "ap-south-1"
    assert access["endpoint_url"] == "https://objects.example.com"
    assert access["path_style"] is True  # auto at an endpoint of one's own
    # AWS_DEFAULT_PROFILE when AWS_PROFILE is unset; AWS_PROFILE wins.
    assert s3_access.resolve({"AWS_DEFAULT_PROFILE": "work"}, str(home))["access_key_id"] == "W"
    assert s3_access.resolve({"AWS_PROFILE": "default", "AWS_DEFAULT_PROFILE": "work"},
                             str(home))["access_key_id"] == "D"


def test_credentials_in_the_config_files_profile_section(home):
    write(home / ".aws" / "config",
          "[profile ci]\naws_access_key_id = C\naws_secret_access_key = CS\n")
    access = s3_access.resolve({"AWS_PROFILE": "ci"}, str(home))
    assert (access["access_key_id"], access["secret_access_key"]) == ("C", "CS")


def test_files_named_by_the_environment_replace_the_defaults(tmp_path, home):
    write(home / ".aws" / "credentials",
          "[default]\naws_access_key_id = HOME\naws_secret_access_key = HS\n")
    credentials = write(tmp_path / "elsewhere" / "creds",
                        "[default]\naws_access_key_id = ELSE\naws_secret_access_key = ES\n")
    config = write(tmp_path / "elsewhere" / "conf", "[default]\nregion = sa-east-1\n")
    access = s3_access.resolve({"AWS_SHARED_CREDENTIALS_FILE": str(credentials),
                                "AWS_CONFIG_FILE": str(config)}, str(home))
    assert access["access_key_id"] == "ELSE"
    assert access["region"] == "sa-east-1"


def test_region_precedence(home):
    write(home / ".aws" / "config", "[default]\nregion = from-config\n")
    env = {"AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "S"}
    assert s3_access.resolve(env, str(home))["region"] == "from-config"
    env["AWS_DEFAULT_REGION"] = "from-default-region"
    assert s3_access.resolve(env, str(home))["region"] == "from-default-region"
    env["AWS_REGION"] = "from-region"
    assert s3_access.resolve(env, str(home))["region"] == "from-region"


def test_endpoint_precedence_and_the_nested_s3_section(home):
    write(home / ".aws" / "config",
          "[default]\nendpoint_url = http://global-config:1\n"
          "s3 =\n  endpoint_url = http://s3-config:2\n  addressing_style = virtual\n")
    env = {"AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "S"}
    access = s3_access.resolve(env, str(home))
    assert access["endpoint_url"] == "http://s3-config:2"  # the service's own first
    assert access["path_style"] is False  # virtual, as the config says
    env["AWS_ENDPOINT_URL"] = "http://global-env:3"
    assert s3_access.resolve(env, str(home))["endpoint_url"] == "http://global-env:3"
    env["AWS_ENDPOINT_URL_S3"] = "http://s3-env:4"
    assert s3_access.resolve(env, str(home))["endpoint_url"] == "http://s3-env:4"


def test_addressing_style_path_in_the_s3_section(home):
    write(home / ".aws" / "config", "[default]\ns3 =\n  addressing_style = path\n")
    env = {"AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "S"}
    access = s3_access.resolve(env, str(home))
    assert access["path_style"] is True and access["endpoint_url"] == ""
    write(home / ".aws" / "config", "[default]\ns3 =\n  addressing_style = sideways\n")
    with pytest.raises(ValueError, match="addressing_style must be path, virtual or auto"):
        s3_access.resolve(env, str(home))


def test_missing_credentials_name_every_place_looked_in(home):
    write(home / ".aws" / "credentials", "[other]\naws_access_key_id = O\n")
    write(home / ".aws" / "config", "[profile work]\nregion = eu-west-1\n")
    with pytest.raises(S3CredentialsNotFound) as raised:
        s3_access.resolve({"AWS_PROFILE": "work"}, str(home), what="s3://b/k.tar")
    message = str(raised.value)
    assert "no S3 credentials for s3://b/k.tar (profile 'work')" in message
    assert "the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set)" in message
    assert f"{home / '.aws' / 'credentials'} [work]: no such section" in message
    assert (f"{home / '.aws' / 'config'} [profile work]: no aws_access_key_id and "
            "aws_secret_access_key") in message
    assert "aws configure --profile work" in message
    assert isinstance(raised.value, PermissionError)


def test_a_half_set_environment_and_missing_files_are_named(home):
    with pytest.raises(S3CredentialsNotFound) as raised:
        s3_access.resolve({"AWS_ACCESS_KEY_ID": "K"}, str(home))
    message = str(raised.value)
    assert "AWS_SECRET_ACCESS_KEY is not set" in message
    assert f"{home / '.aws' / 'credentials'} [default]: no such file" in message
    assert f"{home / '.aws' / 'config'} [default]: no such file" in message
    with pytest.raises(S3CredentialsNotFound) as raised:
        s3_access.resolve({"AWS_SECRET_ACCESS_KEY": "TOPSECRET"}, str(home))
    assert "AWS_ACCESS_KEY_ID is not set" in str(raised.value)
    assert "TOPSECRET" not in str(raised.value)


def test_a_config_file_that_does_not_parse_is_named(home):
    write(home / ".aws" / "config", "region = no section\n")
    with pytest.raises(ValueError, match="cannot be read as an AWS config file"):
        s3_access.resolve({"AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "S"}, str(home))


def test_os_environ_is_the_default_environment(home, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "MONKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "PATCHED")
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "none"))
    access = s3_access.resolve()
    assert (access["access_key_id"], access["region"]) == ("MONKEY", "eu-north-1")


def test_s3_datasets_expand_as_urls():
    from galley import shards
    name, urls = shards.resolve_dataset("s3://bucket/train-{000..002}.tar")
    assert urls == ["s3://bucket/train-000.tar", "s3://bucket/train-001.tar",
                    "s3://bucket/train-002.tar"]
    assert shards.resolve_dataset(["s3://b/x.tar", "s3://b/y.tar"])[1] == ["s3://b/x.tar",
                                                                           "s3://b/y.tar"]
    # A glob goes to galleyd, which lists the bucket with the job's access.
    assert shards.resolve_dataset("s3://bucket/train-*.tar") == ("s3://bucket/train-*.tar",
                                                                 ["s3://bucket/train-*.tar"])
    with pytest.raises(ValueError, match="a glob over s3:// matches objects"):
        shards.resolve_dataset("s3://bucket/imgs/*/")
    with pytest.raises(ValueError, match="mixes s3:// objects and files"):
        shards.resolve_dataset(["s3://b/x.tar", "/data/y.tar"])
    with pytest.raises(ValueError, match="compressed"):
        shards.resolve_dataset("s3://bucket/train.tar.gz")
    # A prefix (an ImageFolder) or a manifest object: no shards.
    assert shards.resolve_dataset("s3://bucket/images/") == ("s3://bucket/images/", None)
    assert shards.resolve_dataset("s3://bucket/train.csv") == ("s3://bucket/train.csv", None)


def process_profile(home, tmp_path, printed, status=0, section="default", extra=""):
    """A config file whose [section] runs a script that prints `printed`
    and exits with `status`."""
    script = write(tmp_path / "bin" / "creds.py",
                   f"import sys\nsys.stdout.write({printed!r})\nsys.exit({status})\n")
    name = "default" if section == "default" else f"profile {section}"
    write(home / ".aws" / "config",
          f"[{name}]\ncredential_process = {sys.executable} {script}\n{extra}")
    return f"{sys.executable} {script}"


def test_credential_process_gives_the_credentials_and_when_they_expire(home, tmp_path):
    process_profile(home, tmp_path, json.dumps({
        "Version": 1, "AccessKeyId": "PROCKEY", "SecretAccessKey": "PROCSECRET",
        "SessionToken": "PROCTOKEN", "Expiration": "2030-01-02T03:04:05Z"}))
    access, expires = s3_access.resolve_timed({}, str(home))
    assert (access["access_key_id"], access["secret_access_key"], access["session_token"]) == (
        "PROCKEY", "PROCSECRET", "PROCTOKEN")
    assert expires == datetime.datetime(2030, 1, 2, 3, 4, 5,
                                        tzinfo=datetime.timezone.utc).timestamp()
    # An offset is read too; no Expiration: credentials that do not expire.
    process_profile(home, tmp_path, json.dumps({
        "Version": 1, "AccessKeyId": "K", "SecretAccessKey": "S",
        "Expiration": "2030-01-02T05:04:05+02:00"}))
    assert s3_access.resolve_timed({}, str(home))[1] == expires
    process_profile(home, tmp_path, json.dumps({"Version": 1, "AccessKeyId": "K",
                                                "SecretAccessKey": "S"}))
    access, expires = s3_access.resolve_timed({}, str(home))
    assert (access["session_token"], expires) == ("", None)


def test_credential_process_comes_after_the_environment_and_the_credentials_file(home,
                                                                                tmp_path):
    # botocore's order: env, the credentials file, credential_process, the
    # config file's own keys.
    process_profile(home, tmp_path, json.dumps({"Version": 1, "AccessKeyId": "PROC",
                                                "SecretAccessKey": "PS"}),
                    extra="aws_access_key_id = CONF\naws_secret_access_key = CS\n")
    assert s3_access.resolve({}, str(home))["access_key_id"] == "PROC"
    env = {"AWS_ACCESS_KEY_ID": "ENV", "AWS_SECRET_ACCESS_KEY": "ES"}
    assert s3_access.resolve(env, str(home))["access_key_id"] == "ENV"
    write(home / ".aws" / "credentials",
          "[default]\naws_access_key_id = FILE\naws_secret_access_key = FS\n")
    assert s3_access.resolve({}, str(home))["access_key_id"] == "FILE"


def test_a_failing_credential_process_is_named_without_its_output(home, tmp_path):
    command = process_profile(home, tmp_path, "SECRETOUTPUT", status=3, section="lab")
    with pytest.raises(S3CredentialProcessError) as raised:
        s3_access.resolve({"AWS_PROFILE": "lab"}, str(home))
    message = str(raised.value)
    assert f"credential_process of {home / '.aws' / 'config'} [profile lab]" in message
    assert f"`{command}` exited with status 3" in message
    assert "SECRETOUTPUT" not in message
    write(home / ".aws" / "config", "[default]\ncredential_process = /no/such/command --x\n")
    with pytest.raises(S3CredentialProcessError, match="`/no/such/command --x` cannot be run"):
        s3_access.resolve({}, str(home))


@pytest.mark.parametrize("printed, expected", [
    ("AKIA... not json", "printed no JSON; it must print the AWS CLI's credential JSON"),
    ("[1, 2]", "printed no JSON object"),
    (json.dumps({"Version": 2, "AccessKeyId": "K", "SecretAccessKey": "SECRETVALUE"}),
     "printed Version '2'; galley reads Version 1"),
    (json.dumps({"Version": 1, "AccessKeyId": "K"}),
     "printed no AccessKeyId and SecretAccessKey strings"),
    (json.dumps({"Version": 1, "AccessKeyId": "K", "SecretAccessKey": "SECRETVALUE",
                 "Expiration": "tomorrow"}), "Expiration 'tomorrow' is no ISO 8601 time"),
])
def test_what_a_credential_process_must_print(home, tmp_path, printed, expected):
    process_profile(home, tmp_path, printed)
    with pytest.raises(S3CredentialProcessError) as raised:
        s3_access.resolve({}, str(home))
    assert expected in str(raised.value)
    assert "SECRETVALUE" not in str(raised.value)
